package httpguard

import (
	"strings"
	"testing"
)

func TestEchoable(t *testing.T) {
	for id, want := range map[string]bool{
		"req-123":                 true,
		"a/b:c=d":                 true,
		"":                        true,
		"has space":               false,
		"line\r\nX-Injected: yes": false,
		"caf\xc3\xa9":             false,
		strings.Repeat("x", 256):  true,
		strings.Repeat("x", 257):  false,
	} {
		if got := Echoable(id); got != want {
			t.Errorf("Echoable(%q) = %v, want %v", id, got, want)
		}
	}
}

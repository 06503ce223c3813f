package check

import (
	"fmt"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

func engines(spec ...string) []fleet.Engine {
	var out []fleet.Engine
	for i, s := range spec {
		e := fleet.Engine{IID: fmt.Sprintf("e%d", i), Role: fleet.Decode}
		switch s {
		case "P":
			e.Role, e.Pin = fleet.Prefill, true
		case "D":
			e.Pin = true
		}
		out = append(out, e)
	}
	return out
}

func TestPairs(t *testing.T) {
	tests := []struct {
		name string
		es   []fleet.Engine
		ring bool
		want string
	}{
		{"mesh of 3", engines("-", "-", "-"), false, "[{e0 e1} {e0 e2} {e1 e0} {e1 e2} {e2 e0} {e2 e1}]"},
		{"mesh honours pins", engines("P", "D", "-"), false, "[{e0 e1} {e0 e2} {e2 e1}]"},
		{"ring of 3", engines("-", "-", "-"), true, "[{e0 e1} {e1 e2} {e2 e0}]"},
		{"ring with pins", engines("P", "P", "D"), true, "[{e0 e2} {e1 e2}]"},
		{"ring covers a lone consumer", engines("P", "-", "-", "-"), true, "[{e0 e1} {e1 e2} {e2 e3} {e3 e1}]"},
		{"no consumer", engines("P", "P"), false, "[]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Mesh(tc.es)
			if tc.ring {
				got = Ring(tc.es)
			}
			if s := fmt.Sprint(got); s != tc.want {
				t.Fatalf("pairs = %s, want %s", s, tc.want)
			}
		})
	}
}

package takeover

import (
	"net"
	"testing"
)

// gone is true only when the primary's port refuses connections: a
// listening router (fenced, still finishing requests) or an address that
// cannot be parsed is never taken for dead.
func TestGoneOnlyOnARefusedConnection(t *testing.T) {
	live, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	for _, tc := range []struct {
		base string
		want bool
	}{
		{"http://" + live.Addr().String(), false},
		{"http://" + deadAddr, true},
		{"http://" + deadAddr + "/", true},
		{"not a url \x7f", false},
		{"", false},
	} {
		if got := gone(t.Context(), tc.base); got != tc.want {
			t.Errorf("gone(%q) = %v, want %v", tc.base, got, tc.want)
		}
	}
}

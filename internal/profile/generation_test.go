package profile

import (
	"strings"
	"testing"
)

func TestStoreGenerations(t *testing.T) {
	g := "sha256:" + strings.Repeat("c", 64)
	st := &Store{Profiles: []Row{{IID: "p0", GenerationDigest: &g}, {IID: "d0"}}}
	got := st.Generations()
	if len(got) != 1 || got["p0"] != g {
		t.Fatalf("Generations = %v, want only p0's %s (d0's row carries none)", got, g)
	}
}

package router

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// TestStartExcludesAStaleProfileGeneration: a row measured on another
// process generation excludes its engine at start; a row bound to the
// live generation, and a row without a digest, do not.
func TestStartExcludesAStaleProfileGeneration(t *testing.T) {
	stale := "sha256:" + strings.Repeat("ab", 32)
	h := startHarness(t, []fleet.Role{fleet.Prefill, fleet.Decode, fleet.Decode}, harnessOptions{
		store: func(st *profile.Store, fl *simengine.Fleet) {
			id, e := vllm.NewClient(fl.URLs()[1], vllm.Options{}).Identity(context.Background())
			if e != nil {
				t.Fatal(e)
			}
			live, err := profile.Generation(id.Version, id.ProcessStart, "")
			if err != nil {
				t.Fatal(err)
			}
			st.Profiles[1].GenerationDigest = &live  // d0: measured on this process
			st.Profiles[2].GenerationDigest = &stale // d1: measured on another
		}})
	got := h.router.ejectedIIDs()
	if !slices.Equal(got, []string{"d1"}) {
		t.Fatalf("ejected at start %v, want only d1 (its profile generation is stale)", got)
	}
}

package router

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

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
	got := h.router.state().Ejected
	if !slices.Equal(got, []string{"d1"}) {
		t.Fatalf("ejected at start %v, want only d1 (its profile generation is stale)", got)
	}
}

// liveDigest is the uncontracted generation of the engine at url now.
func liveDigest(t *testing.T, url string) string {
	t.Helper()
	id, e := vllm.NewClient(url, vllm.Options{}).Identity(context.Background())
	if e != nil {
		t.Fatal(e)
	}
	live, err := profile.Generation(id.Version, id.ProcessStart, "")
	if err != nil {
		t.Fatal(err)
	}
	return live
}

// TestRestartedEngineStaysOutUntilReprofiled: an engine whose profile was
// bound to its process is excluded when it restarts and is not readmitted
// while the profile still names the old generation (runtime.md §3.5.3;
// TestRestartedEngineLeavesServiceAndReturns is the same restart without a
// bound profile, and there the engine returns).
func TestRestartedEngineStaysOutUntilReprofiled(t *testing.T) {
	h := startHarness(t, ppdd, harnessOptions{mod: fastRecovery, store: func(st *profile.Store, fl *simengine.Fleet) {
		d := liveDigest(t, fl.URLs()[3])
		st.Profiles[3].GenerationDigest = &d
	}})
	time.Sleep(20 * time.Millisecond) // a later process start
	h.engines.Engines[3].Restart()
	eventually(t, "d1 excluded as a new process", func() bool { return h.router.life.Ejected()["d1"] == "process_identity" })
	time.Sleep(600 * time.Millisecond) // many readmission probes (readmit_every 2 at 50 ms)
	if !h.ejected("d1") {
		t.Fatal("d1 was readmitted although its profile was measured on the previous process")
	}
}

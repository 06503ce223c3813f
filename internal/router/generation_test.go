package router

import (
	"context"
	"os"
	"path/filepath"
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
	h.engines.Engines[3].Restart()
	eventually(t, "d1 excluded as a new process", func() bool { return h.router.life.Ejected()["d1"] == "process_identity" })
	h.probesRun(t, "d1", 5) // readmission probes
	if !h.ejected("d1") {
		t.Fatal("d1 was readmitted although its profile was measured on the previous process")
	}
}

// TestReprofiledEngineIsReadmittedWithoutARestart: the same restart, then
// the engine re-profiled into profiles.path (as narwhal-profile --merge
// writes it): the router re-reads the store at its next monitor pass,
// and the engine passes the profile_generation gate and returns, with no
// router restart. Before, the router never re-read the store and the
// engine stayed out until the router was restarted.
func TestReprofiledEngineIsReadmittedWithoutARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "profiles.json")
	h := startHarness(t, ppdd, harnessOptions{mod: fastRecovery,
		router: []func(*Options){func(o *Options) { o.Profiles = ProfileSource{Path: path} }},
		store: func(st *profile.Store, fl *simengine.Fleet) {
			d := liveDigest(t, fl.URLs()[3])
			st.Profiles[3].GenerationDigest = &d
			if err := profile.Save(path, st); err != nil {
				t.Fatal(err)
			}
		}})
	h.engines.Engines[3].Restart()
	eventually(t, "d1 excluded as a new process", func() bool { return h.router.life.Ejected()["d1"] == "process_identity" })
	reprofiled := *h.store
	reprofiled.Profiles = slices.Clone(h.store.Profiles)
	d := liveDigest(t, h.engines.URLs()[3])
	reprofiled.Profiles[3].GenerationDigest = &d
	reprofiled.Profiles[3].TTFTC += 0.001 // a re-measured curve
	if err := profile.Save(path, &reprofiled); err != nil {
		t.Fatal(err)
	}
	eventually(t, "d1 readmitted after its re-profile", func() bool { return !h.ejected("d1") })
	raw, _ := os.ReadFile(path)
	st := h.router.state().Profiles
	if st.Reloads != 1 || st.Digest != profile.FileDigest(raw) || st.Error != "" || st.Path != path {
		t.Fatalf("state.profiles %+v, want one re-read at the file's digest %s", st, profile.FileDigest(raw))
	}
	var row profile.Row
	h.router.locked(func() { row = h.router.core.Instance("d1").Profile() })
	if row.TTFTC != reprofiled.Profiles[3].TTFTC {
		t.Fatalf("the core still prices d1 with its old row (ttft_c %v)", row.TTFTC)
	}
}

// A re-read store that does not cover the fleet is refused: the store
// before stays, the state and the reload route say why; a good one is
// taken at once by POST /narwhal/profiles/reload.
func TestProfileReloadRefusesAnIncompleteStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "profiles.json")
	h := startHarness(t, ppdd, harnessOptions{
		router: []func(*Options){func(o *Options) { o.Profiles = ProfileSource{Path: path} }},
		store: func(st *profile.Store, _ *simengine.Fleet) {
			if err := profile.Save(path, st); err != nil {
				t.Fatal(err)
			}
		}})
	short := *h.store
	short.Profiles = h.store.Profiles[:3]
	if err := profile.Save(path, &short); err != nil {
		t.Fatal(err)
	}
	status, raw := h.postPlain("/narwhal/profiles/reload", "")
	body := string(raw)
	if status != 422 || !strings.Contains(body, "profile d1: missing") {
		t.Fatalf("reload of a store without d1: %d %s; want 422 naming d1", status, body)
	}
	if st := h.router.state().Profiles; !strings.Contains(st.Error, "profile d1: missing") || st.Reloads != 0 {
		t.Fatalf("state.profiles %+v after a refused store", st)
	}
	good := *h.store
	good.Profiles = slices.Clone(h.store.Profiles)
	good.Profiles[0].TTFTC += 0.002
	if err := profile.Save(path, &good); err != nil {
		t.Fatal(err)
	}
	status, raw = h.postPlain("/narwhal/profiles/reload", "")
	body = string(raw)
	if status != 200 || !strings.Contains(body, `"changed":["p0"]`) {
		t.Fatalf("reload of a good store: %d %s; want p0 changed", status, body)
	}
	if st := h.router.state().Profiles; st.Error != "" || st.Reloads != 1 {
		t.Fatalf("state.profiles %+v after the good store", st)
	}
}

package router

import (
	"path/filepath"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/state"
)

func resumeFleet(t *testing.T) (*fleet.Config, *profile.Store) {
	cfg := fleet.Defaults()
	cfg.Model = model
	cfg.SLO = fleet.SLO{TTFT: 1, TPOT: 0.1}
	store := &profile.Store{Schema: profile.Schema, SchemaVersion: profile.SchemaVersion}
	for _, e := range []fleet.Engine{{IID: "p0", Role: fleet.Prefill, Pin: true}, {IID: "p1", Role: fleet.Prefill}, {IID: "d0", Role: fleet.Decode}} {
		e.URL = "http://127.0.0.1:1"
		cfg.Engines = append(cfg.Engines, e)
		store.Profiles = append(store.Profiles, simengine.DefaultProfile(e.IID))
	}
	if err := cfg.Validate("test"); err != nil {
		t.Fatal(err)
	}
	return &cfg, store
}

func TestResumeRestoresRolesButNotPins(t *testing.T) {
	cfg, store := resumeFleet(t)
	path := filepath.Join(t.TempDir(), "state.json")
	a, err := New(cfg, store, Options{HA: HA{StatePath: path}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	h := a.ha.Handoff()
	h.Roles = map[string]fleet.Role{"p0": fleet.Decode, "p1": fleet.Decode, "d0": fleet.Prefill} // a controller moved them
	h.Ejected = []string{"d0"}
	h.Counters.Served = 7
	if err := state.Write(path, h); err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg, store, Options{HA: HA{StatePath: path, Resume: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	roles := map[string]fleet.Role{}
	for _, e := range b.core.Snapshot(0).Engines {
		roles[e.IID] = e.Role
	}
	if roles["p0"] != fleet.Prefill || roles["p1"] != fleet.Decode || roles["d0"] != fleet.Prefill {
		t.Errorf("roles after resume %v: want p1 and d0 as saved, pinned p0 as configured", roles)
	}
	if b.av.Usable("d0") || b.stats.Served != 7 {
		t.Errorf("ejection or counters not restored: d0 live %v, served %d", b.av.Usable("d0"), b.stats.Served)
	}
}

func TestResumeWithoutAFileIsAColdStart(t *testing.T) {
	cfg, store := resumeFleet(t)
	c, err := New(cfg, store, Options{HA: HA{StatePath: filepath.Join(t.TempDir(), "none.json"), Resume: true}})
	if err != nil {
		t.Fatalf("missing state file: %v", err)
	}
	c.Close()
}

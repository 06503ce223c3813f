package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/narwhal-go/narwhal/internal/atomicfile"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/probe"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/units"
	"github.com/narwhal-go/narwhal/internal/version"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Fleet is one profiling run over a fleet's engines: what narwhal-profile
// does, and what make run does for its simulated engines.
type Fleet struct {
	Config  *fleet.Config
	Engines []fleet.Engine // the engines to profile
	Limits  map[string]int // per-engine max_num_seqs (--limits)
	Out     string         // the store path
	APIKey  string
	Prev    *profile.Store // --merge: the store whose other rows are kept
	// Progress and Finished report each engine's phases and end (nil: none).
	Progress Progress
	Finished func(iid string, err error)
}

// Sweep measures every engine concurrently: v1 fleets have no shared
// devices, so engines do not disturb one another.
func (j Fleet) Sweep(ctx context.Context, base Config) []Result {
	base.Limits = profile.Limits{MaxDecodeFitMAPE: j.Config.Profiles.MaxDecodeFitMAPE, MaxDecodeCVMAPE: j.Config.Profiles.MaxDecodeCVMAPE}
	out := make([]Result, len(j.Engines))
	clients := map[string]*vllm.Client{}
	for _, e := range j.Engines {
		clients[e.IID] = vllm.NewClient(e.URL, vllm.Options{APIKey: j.APIKey, ConnectTimeout: units.Seconds(j.Config.Engine.ConnectTimeoutS),
			MaxConns: max(64, 2*maxOf(base.Concurrency)), IdleConns: 16})
	}
	// One prober for the run: health, identity and attestation as
	// preflight and readmission read them, on the sweep's clients.
	probes := probe.New(j.Config, probe.Options{Clients: func(iid string) *vllm.Client { return clients[iid] }})
	var wg sync.WaitGroup
	for i, e := range j.Engines {
		cfg := base
		cfg.MaxNumSeqs = j.Limits[e.IID]
		cl := clients[e.IID]
		t := Target{IID: e.IID, Model: j.Config.Model, Client: cl, Contract: j.Config.EngineContract, Probes: probes}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			out[i] = Run(ctx, t, cfg, j.Progress)
			if j.Finished != nil {
				j.Finished(e.IID, out[i].Err)
			}
		}()
	}
	wg.Wait()
	return out
}

func maxOf(v []int) int {
	m := 0
	for _, n := range v {
		m = max(m, n)
	}
	return m
}

// Samples file schema: every raw measurement beside the store.
const (
	SamplesSchema        = "narwhal.profile-samples"
	SamplesSchemaVersion = 1
)

type SamplesDoc struct {
	Schema        string     `json:"schema"`
	SchemaVersion int        `json:"schema_version"`
	Software      software   `json:"software"`
	Fleet         string     `json:"fleet_model"`
	WrittenAt     string     `json:"written_at"`
	Engines       []*Samples `json:"engines"`
}

type software struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// SamplesPath is the store path with its suffix replaced by .samples.json.
func SamplesPath(store string) string {
	return strings.TrimSuffix(store, filepath.Ext(store)) + ".samples.json"
}

// Write saves the samples of every engine that ran (completed or not)
// and, only when every selected engine produced a row, the store. A
// failed or interrupted run leaves the previous store as it was. Both
// files are read, merged and replaced under a lock on <out>.lock, and a
// merge re-reads the store under it: two runs profiling different
// engines at once (a rolling restart) keep each other's rows.
func (j Fleet) Write(results []Result) (int, error) {
	unlock, err := atomicfile.Lock(j.Out + ".lock")
	if err != nil {
		return 0, fmt.Errorf("profile store: %w", err)
	}
	defer unlock()
	if j.Prev != nil {
		fresh, err := profile.Load(j.Out)
		switch {
		case err == nil:
			j.Prev = fresh // what other runs wrote since this one started
		case !errors.Is(err, os.ErrNotExist):
			return 0, fmt.Errorf("--merge: %w", err)
		}
	}
	if err := j.writeSamples(results); err != nil {
		return 0, err
	}
	var rows []profile.Row
	for _, r := range results {
		if r.Row == nil {
			return 0, nil
		}
		rows = append(rows, *r.Row)
	}
	st := &profile.Store{Schema: profile.Schema, SchemaVersion: profile.SchemaVersion}
	if j.Prev != nil {
		st.Profiles = keepOthers(j.Prev.Profiles, rows)
	}
	st.Profiles = append(st.Profiles, rows...)
	if err := profile.Save(j.Out, st); err != nil {
		return 0, err
	}
	return len(rows), nil
}

// keepOthers is the merged store's rows for engines this run did not touch.
func keepOthers(old, fresh []profile.Row) []profile.Row {
	done := map[string]bool{}
	for _, r := range fresh {
		done[r.IID] = true
	}
	var out []profile.Row
	for _, r := range old {
		if !done[r.IID] {
			out = append(out, r)
		}
	}
	return out
}

// writeSamples replaces this run's engines in the samples file, keeping
// the other engines' entries.
func (j Fleet) writeSamples(results []Result) error {
	path := SamplesPath(j.Out)
	doc := SamplesDoc{Schema: SamplesSchema, SchemaVersion: SamplesSchemaVersion,
		Software: software{Name: "narwhal-profile", Version: version.String()}, Fleet: j.Config.Model,
		WrittenAt: time.Now().UTC().Format(time.RFC3339)}
	if old, err := readSamples(path); err == nil {
		for _, s := range old.Engines {
			if !ranIn(results, s.IID) {
				doc.Engines = append(doc.Engines, s)
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, r := range results {
		if r.Samples != nil {
			doc.Engines = append(doc.Engines, r.Samples)
		}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("samples %s: %w", path, err)
	}
	return atomicfile.Write(path, append(b, '\n'), 0o644)
}

func readSamples(path string) (*SamplesDoc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d SamplesDoc
	if err := json.Unmarshal(b, &d); err != nil || d.Schema != SamplesSchema {
		return nil, fmt.Errorf("samples file %s is not a %s document (move it aside)", path, SamplesSchema)
	}
	if d.SchemaVersion != SamplesSchemaVersion {
		return nil, fmt.Errorf("samples file %s has schema_version %d; this build reads %d", path, d.SchemaVersion, SamplesSchemaVersion)
	}
	return &d, nil
}

func ranIn(results []Result, iid string) bool {
	for _, r := range results {
		if r.Samples != nil && r.Samples.IID == iid {
			return true
		}
	}
	return false
}

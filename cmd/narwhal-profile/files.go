package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/narwhal-go/narwhal/internal/atomicfile"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/profile/sweep"
	"github.com/narwhal-go/narwhal/internal/version"
)

// Samples file schema: every raw measurement beside the store.
const (
	samplesSchema        = "narwhal.profile-samples"
	samplesSchemaVersion = 1
)

type samplesDoc struct {
	Schema        string           `json:"schema"`
	SchemaVersion int              `json:"schema_version"`
	Software      software         `json:"software"`
	Fleet         string           `json:"fleet_model"`
	WrittenAt     string           `json:"written_at"`
	Engines       []*sweep.Samples `json:"engines"`
}

type software struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// samplesPath is the store path with its suffix replaced by .samples.json.
func samplesPath(store string) string {
	return strings.TrimSuffix(store, filepath.Ext(store)) + ".samples.json"
}

// write saves the samples of every engine that ran (completed or not)
// and, only when every selected engine produced a row, the store. A
// failed or interrupted run leaves the previous store as it was.
func (j *job) write(results []sweep.Result, elapsed time.Duration) (int, error) {
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
	if j.prev != nil {
		st.Profiles = keepOthers(j.prev.Profiles, rows)
	}
	st.Profiles = append(st.Profiles, rows...)
	if err := profile.Save(j.out, st); err != nil {
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
func (j *job) writeSamples(results []sweep.Result) error {
	path := samplesPath(j.out)
	doc := samplesDoc{Schema: samplesSchema, SchemaVersion: samplesSchemaVersion,
		Software: software{Name: "narwhal-profile", Version: version.String()}, Fleet: j.cfg.Model,
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

func readSamples(path string) (*samplesDoc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d samplesDoc
	if err := json.Unmarshal(b, &d); err != nil || d.Schema != samplesSchema {
		return nil, fmt.Errorf("samples file %s is not a %s document (move it aside)", path, samplesSchema)
	}
	if d.SchemaVersion != samplesSchemaVersion {
		return nil, fmt.Errorf("samples file %s has schema_version %d; this build reads %d", path, d.SchemaVersion, samplesSchemaVersion)
	}
	return &d, nil
}

func ranIn(results []sweep.Result, iid string) bool {
	for _, r := range results {
		if r.Samples != nil && r.Samples.IID == iid {
			return true
		}
	}
	return false
}

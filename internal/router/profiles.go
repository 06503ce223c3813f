package router

import (
	"fmt"
	"net/http"
	"os"
	"reflect"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/narwhal-go/narwhal/internal/openai"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
)

// ProfileSource is where the router's profile store came from: the file
// it re-reads when it changes, and the digest of the bytes loaded. A
// zero ProfileSource (a store built in memory) is never re-read.
type ProfileSource struct {
	Path   string
	Digest string // profile.FileDigest of the loaded bytes
}

// profileWatch re-reads the profile store when its file changes, so that
// an engine re-profiled with narwhal-profile --merge (after a restart or
// a relaunch) is priced with its new row and passes the readmission
// gate's profile_generation check without a router restart.
type profileWatch struct {
	mu    sync.Mutex // guards every field below; held across a re-read, never with Router.mu held first
	path  string
	stamp fileStamp // the file as last read
	rows  map[string]profile.Row
	state routerdoc.ProfilesState
}

// fileStamp tells a changed file: size, modification time and inode (a
// rename into place, as atomicfile writes, moves the inode on).
type fileStamp struct {
	size  int64
	mtime time.Time
	ino   uint64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	st := fileStamp{size: fi.Size(), mtime: fi.ModTime()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st, nil
}

// newProfileWatch starts from the store New was given.
func newProfileWatch(src ProfileSource, store *profile.Store, now time.Time) *profileWatch {
	w := &profileWatch{path: src.Path, rows: map[string]profile.Row{},
		state: routerdoc.ProfilesState{Path: src.Path, Digest: src.Digest, LoadedAt: now.UTC().Format(time.RFC3339)}}
	for _, r := range store.Profiles {
		w.rows[r.IID] = r
	}
	if src.Path != "" {
		w.stamp, _ = stampOf(src.Path) // unreadable: the first pass that can read it re-reads
	}
	return w
}

// State is /narwhal/state.profiles.
func (w *profileWatch) State() routerdoc.ProfilesState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state
}

// profileReload is what one re-read did.
type profileReload struct {
	Digest  string   `json:"digest"`
	Changed []string `json:"changed"` // iids whose rows changed, sorted
	Error   string   `json:"error,omitempty"`
}

// checkProfiles re-reads the store when its file changed since the last
// read (each monitor pass).
func (r *Router) checkProfiles() {
	w := r.profiles
	if w.path == "" {
		return
	}
	st, err := stampOf(w.path)
	w.mu.Lock()
	unchanged := err != nil || st == w.stamp
	w.mu.Unlock()
	if unchanged {
		return // a file being replaced is read at the next pass
	}
	r.reloadProfiles()
}

// reloadProfiles reads the store at the watched path and, when it parses
// and covers the fleet's engines, hands each changed row to the core and
// the new generation digests to the readmission gate. A refused store
// changes nothing: the one before stays in use, and the state says why.
func (r *Router) reloadProfiles() profileReload {
	w := r.profiles
	w.mu.Lock()
	defer w.mu.Unlock()
	st, _ := stampOf(w.path)
	store, digest, err := profile.LoadDigest(w.path)
	if err == nil {
		err = checkProfilesCover(r.cfg, store)
	}
	w.stamp = st // a refused file is not re-read until it changes again
	if err != nil {
		w.state.Error = err.Error()
		r.metrics.ProfileReloads.WithLabelValues("refused").Inc()
		r.log.Error("profile store not re-read; the one before stays in use", "path", w.path, "err", err)
		return profileReload{Digest: w.state.Digest, Error: err.Error()}
	}
	changed := r.applyProfilesLocked(store)
	w.state.Digest, w.state.Error, w.state.LoadedAt = digest, "", r.clock.Now().UTC().Format(time.RFC3339)
	if len(changed) > 0 {
		w.state.Reloads++
		r.metrics.ProfileReloads.WithLabelValues("taken").Inc()
		r.log.Info("profile store re-read", "path", w.path, "digest", digest, "changed", changed)
	}
	return profileReload{Digest: digest, Changed: changed}
}

// applyProfilesLocked gives the core every changed row and the gate the
// store's generations; it returns the changed iids. Called with w.mu
// held.
func (r *Router) applyProfilesLocked(store *profile.Store) []string {
	w := r.profiles
	var changed []string
	for _, row := range store.Profiles {
		if !reflect.DeepEqual(w.rows[row.IID], row) {
			changed = append(changed, row.IID)
			w.rows[row.IID] = row
		}
	}
	sort.Strings(changed)
	if len(changed) == 0 {
		return nil
	}
	r.locked(func() {
		for _, iid := range changed {
			r.core.SetProfile(iid, w.rows[iid])
		}
	})
	r.av.SetGenerations(store.Generations())
	return changed
}

func checkProfilesCover(cfg interface{ IIDs() []string }, store *profile.Store) error {
	if err := store.Cover(cfg.IIDs()); err != nil {
		return fmt.Errorf("%w; the fleet's engines must each have exactly one row", err)
	}
	return nil
}

// serveProfilesReload is POST /narwhal/profiles/reload: re-read the store
// now, whether or not the file looks changed.
func (r *Router) serveProfilesReload(w http.ResponseWriter, _ *http.Request) {
	if r.profiles.path == "" {
		openai.Invalid(http.StatusConflict, "no_profile_file", "this router's profile store was not loaded from a file: there is nothing to re-read").Write(w)
		return
	}
	res := r.reloadProfiles()
	if res.Error != "" {
		openai.Invalid(http.StatusUnprocessableEntity, "profile_store_refused", "profile store not re-read, the one before stays in use: "+res.Error).Write(w)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

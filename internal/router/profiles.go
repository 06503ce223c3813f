package router

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"sort"
	"sync/atomic"
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
//
// It holds no mutex (the package's one is Router.mu, which a re-read must
// not hold across its file I/O): busy is a one-token semaphore, and only
// its holder touches stamp and rows; the published state is swapped
// whole.
type profileWatch struct {
	path  string
	busy  chan struct{} // one token: held by the re-read in progress
	stamp fileStamp     // the file as last read; busy's holder only
	rows  map[string]profile.Row
	state atomic.Pointer[routerdoc.ProfilesState]
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
	w := &profileWatch{path: src.Path, rows: map[string]profile.Row{}, busy: make(chan struct{}, 1)}
	w.state.Store(&routerdoc.ProfilesState{Path: src.Path, Digest: src.Digest, LoadedAt: now.UTC().Format(time.RFC3339)})
	for _, r := range store.Profiles {
		w.rows[r.IID] = r
	}
	if src.Path != "" {
		w.stamp, _ = stampOf(src.Path) // unreadable: the first pass that can read it re-reads
	}
	return w
}

// State is /narwhal/state.profiles.
func (w *profileWatch) State() routerdoc.ProfilesState { return *w.state.Load() }

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
	select {
	case w.busy <- struct{}{}:
	default:
		return // a reload route's re-read is in progress
	}
	defer func() { <-w.busy }()
	if st, err := stampOf(w.path); err != nil || st == w.stamp {
		return // unchanged, or being replaced: the next pass reads it
	}
	r.reloadBusy()
}

// reloadProfiles reads the store at the watched path and, when it parses
// and covers the fleet's engines, hands each changed row to the core and
// the new generation digests to the readmission gate. A refused store
// changes nothing: the one before stays in use, and the state says why.
func (r *Router) reloadProfiles(ctx context.Context) (profileReload, error) {
	w := r.profiles
	select {
	case w.busy <- struct{}{}:
	case <-ctx.Done():
		return profileReload{}, ctx.Err()
	}
	defer func() { <-w.busy }()
	return r.reloadBusy(), nil
}

// reloadBusy is the re-read itself; its caller holds w.busy.
func (r *Router) reloadBusy() profileReload {
	w := r.profiles
	st, _ := stampOf(w.path)
	store, digest, err := profile.LoadDigest(w.path)
	if err == nil {
		err = checkProfilesCover(r.cfg, store)
	}
	w.stamp = st // a refused file is not re-read until it changes again
	next := w.State()
	if err != nil {
		next.Error = err.Error()
		w.state.Store(&next)
		r.metrics.ProfileReloads.WithLabelValues("refused").Inc()
		r.log.Error("profile store not re-read; the one before stays in use", "path", w.path, "err", err)
		return profileReload{Digest: next.Digest, Error: err.Error()}
	}
	changed := r.applyProfiles(store)
	next.Digest, next.Error, next.LoadedAt = digest, "", r.clock.Now().UTC().Format(time.RFC3339)
	if len(changed) > 0 {
		next.Reloads++
		r.metrics.ProfileReloads.WithLabelValues("taken").Inc()
		r.log.Info("profile store re-read", "path", w.path, "digest", digest, "changed", changed)
	}
	w.state.Store(&next)
	return profileReload{Digest: digest, Changed: changed}
}

// applyProfiles gives the core every changed row and the gate the
// store's generations; it returns the changed iids. Its caller holds
// w.busy.
func (r *Router) applyProfiles(store *profile.Store) []string {
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
func (r *Router) serveProfilesReload(w http.ResponseWriter, q *http.Request) {
	if r.profiles.path == "" {
		openai.Invalid(http.StatusConflict, "no_profile_file", "this router's profile store was not loaded from a file: there is nothing to re-read").Write(w)
		return
	}
	res, err := r.reloadProfiles(q.Context())
	if err != nil {
		return // the client left while another re-read ran
	}
	if res.Error != "" {
		openai.Invalid(http.StatusUnprocessableEntity, "profile_store_refused", "profile store not re-read, the one before stays in use: "+res.Error).Write(w)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

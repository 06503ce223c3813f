package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/narwhal-go/narwhal/internal/ports"
)

// Standby defaults (runtime.md §7: fixed, not flags).
const (
	DefaultStandbyInterval = 250 * time.Millisecond
	DefaultTakeoverAfter   = 4
	DefaultMaxHandoffAge   = 30 * time.Second
	DefaultProbeTimeout    = time.Second
)

// The failover_blocked reasons a follower reports.
const (
	BlockedNoFreshHandoff = "no fresh handoff"
)

// Follower is the standby loop of runtime.md §3.8: it shadows a primary,
// keeps its last good handoff, and takes over (steps 1–3) once the primary
// has missed TakeoverAfter consecutive probes and its lease has expired.
// The caller then applies the document like a resume and runs takeover
// steps 4–8 (on failure: Lease.Release and Run again).
type Follower struct {
	Primary       string        // base URL of the primary router
	Lease         *Lease        // this router's lease handle on the shared file
	HTTP          *http.Client  // nil: a client of its own
	Clock         ports.Clock   // probe pacing and handoff freshness
	Interval      time.Duration // 0: DefaultStandbyInterval
	TakeoverAfter int           // 0: DefaultTakeoverAfter
	MaxHandoffAge time.Duration // 0: DefaultMaxHandoffAge
	ProbeTimeout  time.Duration // per HTTP request; 0: DefaultProbeTimeout
	Engines       []string      // configured engines a probed handoff is validated against
	Policy        string        // configured restart policy
	StatePath     string        // where good documents are written; "" to skip
	Logger        *slog.Logger  // nil: no logs

	mu           sync.Mutex // guards the fields below: the loop writes them, /ready reads them
	doc          *Handoff   // last good document
	goods        int64      // good probes since start
	misses       int
	lastMiss     string
	blocked      string
	epochBlocked bool // a takeover found doc.epoch ≠ claimed − 1; wait for a new good probe
}

// FailoverBlocked is the reason takeover is blocked ("" when it is not),
// for /health (fenced) and /ready.
func (f *Follower) FailoverBlocked() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.blocked
}

// LastMiss says why the last probe missed ("" after a good one), for logs.
func (f *Follower) LastMiss() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastMiss
}

// FollowerStatus is what a standby reports about its primary: an
// operator (and a test) reads from it whether the standby is warm, that
// is holds a fresh document to take over with.
type FollowerStatus struct {
	Primary    string
	GoodProbes int64   // probes that returned a usable handoff since start
	Misses     int     // consecutive misses now
	LastMiss   string  // why the last probe missed; "" after a good one
	HandoffAt  float64 // the last good document's at (primary wall clock, Unix s); 0 before one
}

// Status is the follower's current FollowerStatus.
func (f *Follower) Status() FollowerStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := FollowerStatus{Primary: f.Primary, GoodProbes: f.goods, Misses: f.misses, LastMiss: f.lastMiss}
	if f.doc != nil {
		st.HandoffAt = f.doc.At
	}
	return st
}

// Run probes the primary every Interval until it takes over, ctx ends, or
// a probed document has a schema_version this build does not read (the
// standby cannot safely take over from a different build). On takeover it
// returns the stored document and the claimed lease epoch.
func (f *Follower) Run(ctx context.Context) (*Handoff, int, error) {
	if err := f.check(); err != nil {
		return nil, 0, err
	}
	for {
		doc, epoch, err := f.step(ctx)
		if err != nil || doc != nil {
			return doc, epoch, err
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-f.Clock.After(orDefault(f.Interval, DefaultStandbyInterval)):
		}
	}
}

func (f *Follower) check() error {
	switch {
	case f.Primary == "":
		return errors.New("standby: --standby-of is empty; give the primary's base URL")
	case f.Lease == nil:
		return errors.New("standby: --standby-of requires --lease-path")
	case f.Clock == nil:
		return errors.New("standby: no clock")
	}
	if f.HTTP == nil {
		f.HTTP = &http.Client{}
	}
	f.Primary = strings.TrimRight(f.Primary, "/")
	return nil
}

// step is one probe and, after enough misses, one takeover attempt.
func (f *Follower) step(ctx context.Context) (*Handoff, int, error) {
	doc, miss, err := f.probe(ctx)
	if err != nil {
		return nil, 0, err
	}
	if doc != nil {
		f.good(doc)
		return nil, 0, nil
	}
	f.mu.Lock()
	f.misses++
	f.lastMiss = miss
	n := f.misses
	f.mu.Unlock()
	if f.Logger != nil {
		f.Logger.Debug("standby probe missed", "misses", n, "reason", miss)
	}
	if n < orDefault(f.TakeoverAfter, DefaultTakeoverAfter) {
		return nil, 0, nil
	}
	return f.takeover()
}

// good stores a document that passed all three probes and writes it to
// StatePath, so a restart of this standby can resume from it.
func (f *Follower) good(doc *Handoff) {
	f.mu.Lock()
	f.doc, f.misses, f.lastMiss, f.blocked, f.epochBlocked = doc, 0, "", "", false
	f.goods++
	f.mu.Unlock()
	if f.StatePath == "" {
		return
	}
	if err := Write(f.StatePath, doc); err != nil {
		// The document is still held in memory for a takeover; a disk
		// problem must not stop the standby from following.
		f.log("standby could not write the handoff", "err", err)
	}
}

func (f *Follower) setBlocked(reason string) {
	f.mu.Lock()
	f.blocked = reason
	f.mu.Unlock()
}

func (f *Follower) log(msg string, args ...any) {
	if f.Logger != nil {
		f.Logger.Info(msg, args...)
	}
}

func orDefault[T int | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// takeover is steps 1–3 of §3.8: a fresh document, the lease claimed
// once the old one expired, and the document's epoch directly before the
// claimed one (else a newer primary may have written state we never saw).
func (f *Follower) takeover() (*Handoff, int, error) {
	f.mu.Lock()
	doc, epochBlocked := f.doc, f.epochBlocked
	f.mu.Unlock()
	maxAge := orDefault(f.MaxHandoffAge, DefaultMaxHandoffAge)
	if doc == nil || unixS(f.Clock.Now())-doc.At > maxAge.Seconds() {
		f.setBlocked(BlockedNoFreshHandoff)
		return nil, 0, nil
	}
	if epochBlocked {
		return nil, 0, nil
	}
	epoch, err := f.Lease.Claim()
	var held *HeldError
	if errors.As(err, &held) {
		return nil, 0, nil // the old lease has not expired: try on the next miss
	}
	if err != nil {
		f.setBlocked("lease unavailable: " + err.Error())
		return nil, 0, nil
	}
	if doc.Epoch != epoch-1 {
		relErr := f.Lease.Release()
		f.mu.Lock()
		f.epochBlocked = true
		f.blocked = fmt.Sprintf("handoff epoch %d does not precede claimed lease epoch %d", doc.Epoch, epoch)
		f.mu.Unlock()
		f.log("standby takeover blocked", "reason", f.FailoverBlocked(), "release_err", relErr)
		return nil, 0, nil
	}
	f.setBlocked("")
	f.log("standby took over", "epoch", epoch, "handoff_at", doc.At)
	return doc, epoch, nil
}

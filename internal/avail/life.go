package avail

import (
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// lockedLife is the lifecycle manager behind avail's one mutex
// (publication.mu): lifecycle has no lock of its own, so every call
// from the request path, the probe jobs, the admin routes, the monitor
// goroutine and the state readers is serialized here. Every change is a
// lifecycle.Step (step), so the manager's whole history is a log of
// Steps and Readys that replays (lifecycle.Replay); the rest are reads.
// Each method holds the lock for the manager's call alone; the ones that
// do engine I/O (Drain's identity capture, Readmit's gates) release it
// around that I/O. Leg outcomes and ticks go through Supervisor.step
// (Step and Ready in one critical section) instead.
// It is the View the router and internal/takeover read.
type lockedLife struct {
	p   *publication
	m   *lifecycle.Manager
	now func() float64 // router seconds: each Step's time
}

// step applies one input under the lock and returns its answer; what to
// do about it (events, liveness) comes with the next Ready.
func (l lockedLife) step(in lifecycle.Input) lifecycle.Answer {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.Step(l.now(), in)
}

// Drain is lifecycle.Manager.Drain as two steps, capture run unlocked
// between them.
func (l lockedLife) Drain(iid string, now, deadlineS float64, lastLive bool, capture func() (vllm.Identity, error)) (lifecycle.Record, error) {
	if a := l.step(lifecycle.BeginDrain{IID: iid, Wall: now, DeadlineS: deadlineS, LastLive: lastLive}); a.Err != nil {
		return a.Record, a.Err
	}
	fin := lifecycle.FinishDrain{IID: iid, Wall: now}
	var err error
	if fin.ID, err = capture(); err != nil {
		fin.Failure = err.Error()
	}
	a := l.step(fin)
	return a.Record, a.Err
}

// Readmit is lifecycle.Manager.Readmit as two steps, the gates run
// unlocked between them.
func (l lockedLife) Readmit(iid string, now float64, gates lifecycle.Gates) (lifecycle.Record, error) {
	a := l.step(lifecycle.BeginReadmit{IID: iid, Wall: now})
	if a.Err != nil {
		return a.Record, a.Err
	}
	checks, seen := gates(iid, a.Old, a.RequireNewer)
	a = l.step(lifecycle.FinishReadmit{IID: iid, Wall: now, Checks: checks, Seen: seen})
	return a.Record, a.Err
}

// Build is lifecycle.Manager.Build under the lock.
func (l lockedLife) Build() string {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.Build()
}

// Ejected is lifecycle.Manager.Ejected under the lock.
func (l lockedLife) Ejected() map[string]string {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.Ejected()
}

// Events is lifecycle.Manager.Events under the lock.
func (l lockedLife) Events() []lifecycle.Event {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.Events()
}

// Held is lifecycle.Manager.Held under the lock.
func (l lockedLife) Held() []string {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.Held()
}

// Holds is lifecycle.Manager.Holds under the lock.
func (l lockedLife) Holds() []lifecycle.Hold {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.Holds()
}

// NextRelease is lifecycle.Manager.NextRelease under the lock.
func (l lockedLife) NextRelease(now, pass float64) (float64, bool) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.NextRelease(now, pass)
}

// ProcessStarts is lifecycle.Manager.ProcessStarts under the lock.
func (l lockedLife) ProcessStarts() map[string]float64 {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.ProcessStarts()
}

// Quarantined is lifecycle.Manager.Quarantined under the lock.
func (l lockedLife) Quarantined() []string {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.Quarantined()
}

// Records is lifecycle.Manager.Records under the lock.
func (l lockedLife) Records() []lifecycle.Record {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.Records()
}

// Streaks is lifecycle.Manager.Streaks under the lock.
func (l lockedLife) Streaks() map[string]map[lifecycle.Class]int {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.Streaks()
}

// Suspect is lifecycle.Manager.Suspect under the lock.
func (l lockedLife) Suspect(iid string) bool {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.Suspect(iid)
}

package avail

import (
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// lockedLife is the lifecycle manager behind avail's one mutex
// (publication.mu): lifecycle has no lock of its own, so every call
// from the request path, the probe jobs, the admin routes, the monitor
// goroutine and the state readers is serialized here. Each method holds
// the lock for the manager's call alone; the ones that do engine I/O
// (Drain's identity capture, Readmit's gates) release it around that I/O.
// Leg outcomes and ticks go through Supervisor.step (Step and Ready in
// one critical section) instead.
// It is the View the router and internal/takeover read.
type lockedLife struct {
	p *publication
	m *lifecycle.Manager
}

// Drain is lifecycle.Manager.Drain with capture run unlocked.
func (l lockedLife) Drain(iid string, now, deadlineS float64, lastLive bool, capture func() (vllm.Identity, error)) (lifecycle.Record, error) {
	l.p.mu.Lock()
	rec, err := l.m.BeginDrain(iid, now, deadlineS, lastLive)
	l.p.mu.Unlock()
	if err != nil {
		return rec, err
	}
	id, err := capture()
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.FinishDrain(iid, now, id, err)
}

// Readmit is lifecycle.Manager.Readmit with the gates run unlocked.
func (l lockedLife) Readmit(iid string, now float64, gates lifecycle.Gates) (lifecycle.Record, error) {
	l.p.mu.Lock()
	old, requireNewer, rec, err := l.m.BeginReadmit(iid, now)
	l.p.mu.Unlock()
	if err != nil {
		return rec, err
	}
	checks, seen := gates(iid, old, requireNewer)
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.FinishReadmit(iid, now, checks, seen)
}

// AcceptIdentity is lifecycle.Manager.AcceptIdentity under the lock.
func (l lockedLife) AcceptIdentity(iid string, id vllm.Identity) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	l.m.AcceptIdentity(iid, id)
}

// Build is lifecycle.Manager.Build under the lock.
func (l lockedLife) Build() string {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.Build()
}

// CheckIdentity is lifecycle.Manager.CheckIdentity under the lock.
func (l lockedLife) CheckIdentity(iid string, seen vllm.Identity) (bool, vllm.Identity) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.CheckIdentity(iid, seen)
}

// Eject is lifecycle.Manager.Eject under the lock.
func (l lockedLife) Eject(iid, cause string) bool {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.Eject(iid, cause)
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

// Hold is lifecycle.Manager.Hold under the lock.
func (l lockedLife) Hold(iid, cause, detail string, now float64) bool {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.Hold(iid, cause, detail, now)
}

// Holds is lifecycle.Manager.Holds under the lock.
func (l lockedLife) Holds() []lifecycle.Hold {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.Holds()
}

// KVRefused is lifecycle.Manager.KVRefused under the lock.
func (l lockedLife) KVRefused(consumer, producer, localHash, remoteHash string, now float64) string {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.KVRefused(consumer, producer, localHash, remoteHash, now)
}

// NewProcess is lifecycle.Manager.NewProcess under the lock.
func (l lockedLife) NewProcess(iid string, start float64) bool {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.NewProcess(iid, start)
}

// NextRelease is lifecycle.Manager.NextRelease under the lock.
func (l lockedLife) NextRelease(now, pass float64) (float64, bool) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.NextRelease(now, pass)
}

// Note is lifecycle.Manager.Note under the lock.
func (l lockedLife) Note(at float64, action string, fields map[string]any) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	l.m.Note(at, action, fields)
}

// ObserveVersion is lifecycle.Manager.ObserveVersion under the lock.
func (l lockedLife) ObserveVersion(iid, version string, now float64) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	l.m.ObserveVersion(iid, version, now)
}

// ProcessStarts is lifecycle.Manager.ProcessStarts under the lock.
func (l lockedLife) ProcessStarts() map[string]float64 {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.ProcessStarts()
}

// Quarantine is lifecycle.Manager.Quarantine under the lock.
func (l lockedLife) Quarantine(iid string, until float64) bool {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.Quarantine(iid, until)
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

// Recovered is lifecycle.Manager.Recovered under the lock.
func (l lockedLife) Recovered(iid string) bool {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.Recovered(iid)
}

// Release is lifecycle.Manager.Release under the lock.
func (l lockedLife) Release(iid, cause string) bool {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.Release(iid, cause)
}

// ReleaseQuarantines is lifecycle.Manager.ReleaseQuarantines under the lock.
func (l lockedLife) ReleaseQuarantines(now float64) []string {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.m.ReleaseQuarantines(now)
}

// Restore is lifecycle.Manager.Restore under the lock.
func (l lockedLife) Restore(records []lifecycle.Record, ejected map[string]string, starts map[string]float64) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	l.m.Restore(records, ejected, starts)
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

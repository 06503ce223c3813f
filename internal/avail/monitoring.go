package avail

import (
	"fmt"
	"sync/atomic"

	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
)

// monitoring tracks failed monitor-pass stages (runtime.md §3.4). A pass
// with a failed stage counts against controller.monitor_failure_limit;
// at the limit the router is degraded: it stops admitting new requests
// (resident work continues) until a fully successful pass.
//
// Its fields belong to the monitor goroutine, the only caller of
// StageFailed and PassEnded; readers get what those publish (reason,
// doc), so there is no lock.
type monitoring struct {
	consecutive int
	failures    int
	degraded    string // "<stage> <class>" of the streak's first failure, "" when healthy
	first       string
	stages      map[string]*stageStats
	// reason is DegradedReason's answer, published whenever degraded
	// changes: the request path's readiness check reads it.
	reason atomic.Pointer[string]
	// doc is MonitoringState's answer, published after every change.
	doc atomic.Pointer[routerdoc.MonitoringState]
}

type stageStats struct {
	Failures    int    `json:"failures"`
	Consecutive int    `json:"consecutive"`
	LastClass   string `json:"last_class"`
	LastAt      float64
}

// StageFailed records a failed stage of the current pass; the monitor
// goroutine calls it.
func (s *Supervisor) StageFailed(stage, class string, err error) {
	m := &s.mon
	if m.stages == nil {
		m.stages = map[string]*stageStats{}
	}
	st := m.stages[stage]
	if st == nil {
		st = &stageStats{}
		m.stages[stage] = st
	}
	st.Failures++
	st.Consecutive++
	st.LastClass, st.LastAt = class, s.now()
	m.publish()
	s.log.Error("monitoring stage failed", "stage", stage, "class", class, "err", err)
	s.journalEvent(journal.Event{Name: journal.EventMonitoringStageFailure, At: s.now(),
		Fields: map[string]any{"stage": stage, "class": class, "consecutive": st.Consecutive}})
}

// PassEnded closes a monitor pass: failed says whether any stage failed.
// The monitor goroutine calls it.
func (s *Supervisor) PassEnded(failed []string) {
	m := &s.mon
	defer m.publish()
	if len(failed) == 0 {
		for _, st := range m.stages {
			st.Consecutive = 0
		}
		if m.degraded != "" {
			m.degraded = ""
			m.reason.Store(nil)
			s.metrics.MonitoringDegraded.Set(0)
			s.journalEvent(journal.Event{Name: journal.EventMonitoringRecovered, At: s.now(), Fields: map[string]any{}})
			s.log.Info("monitoring recovered: admitting again")
		}
		m.consecutive, m.first = 0, ""
		s.metrics.MonitoringCoreConsecutive.Set(0)
		return
	}
	if m.consecutive == 0 {
		m.first = failed[0]
	}
	m.consecutive++
	m.failures++
	s.metrics.MonitoringCoreFailures.Inc()
	s.metrics.MonitoringCoreConsecutive.Set(float64(m.consecutive))
	if m.degraded == "" && m.consecutive >= s.cfg.Controller.MonitorFailureLimit {
		m.degraded = m.first
		reason := fmt.Sprintf("monitoring degraded: %s", m.degraded)
		m.reason.Store(&reason)
		s.metrics.MonitoringDegraded.Set(1)
		s.journalEvent(journal.Event{Name: journal.EventMonitoringDegraded, At: s.now(),
			Fields: map[string]any{"stage": m.first, "class": "", "core_consecutive": m.consecutive}})
		s.log.Error("monitoring degraded: new requests are refused until a monitor pass succeeds", "stage", m.first)
	}
}

// publish copies the monitor goroutine's counts into the document its
// readers load.
func (m *monitoring) publish() {
	stages := map[string]routerdoc.MonitoringStage{}
	for name, st := range m.stages {
		stages[name] = routerdoc.MonitoringStage{Failures: st.Failures, Consecutive: st.Consecutive,
			LastClass: st.LastClass, LastAt: st.LastAt}
	}
	var reason *string
	if m.degraded != "" {
		d := m.degraded
		reason = &d
	}
	m.doc.Store(&routerdoc.MonitoringState{Degraded: m.degraded != "", Reason: reason, CoreConsecutive: m.consecutive,
		CoreFailures: m.failures, Stages: stages})
}

// DegradedReason is "" or the readiness reason while degraded.
// It takes no lock (the request path asks on every admission).
func (s *Supervisor) DegradedReason() string {
	if p := s.mon.reason.Load(); p != nil {
		return *p
	}
	return ""
}

// MonitoringState is /narwhal/state.monitoring; lagS is the router's
// event-loop lag in seconds.
func (s *Supervisor) MonitoringState(lagS float64) routerdoc.MonitoringState {
	doc := routerdoc.MonitoringState{Stages: map[string]routerdoc.MonitoringStage{}}
	if p := s.mon.doc.Load(); p != nil {
		doc = *p // a copy; its maps are never written after publication
	}
	doc.EventLoopLagS = lagS
	return doc
}

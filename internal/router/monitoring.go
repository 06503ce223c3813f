package router

import (
	"fmt"
	"sync"

	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
)

// monitoring tracks failed monitor-pass stages (runtime.md §3.4). A pass
// with a failed stage counts against controller.monitor_failure_limit;
// at the limit the router is degraded: it stops admitting new requests
// (resident work continues) until a fully successful pass.
type monitoring struct {
	mu          sync.Mutex
	consecutive int
	failures    int
	degraded    string // "<stage> <class>" of the streak's first failure, "" when healthy
	first       string
	stages      map[string]*stageStats
}

type stageStats struct {
	Failures    int    `json:"failures"`
	Consecutive int    `json:"consecutive"`
	LastClass   string `json:"last_class"`
	LastAt      float64
}

// stageFailed records a failed stage of the current pass.
func (r *Router) stageFailed(stage, class string, err error) {
	m := &r.mon
	m.mu.Lock()
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
	st.LastClass, st.LastAt = class, r.now()
	n := st.Consecutive
	m.mu.Unlock()
	r.log.Error("monitoring stage failed", "stage", stage, "class", class, "err", err)
	r.journalEvent(journal.Event{Name: journal.EventMonitoringStageFailure, At: r.now(),
		Fields: map[string]any{"stage": stage, "class": class, "consecutive": n}})
}

// passEnded closes a monitor pass: failed says whether any stage failed.
func (r *Router) passEnded(failed []string) {
	m := &r.mon
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(failed) == 0 {
		for _, st := range m.stages {
			st.Consecutive = 0
		}
		if m.degraded != "" {
			m.degraded = ""
			r.metrics.MonitoringDegraded.Set(0)
			r.journalEvent(journal.Event{Name: journal.EventMonitoringRecovered, At: r.now(), Fields: map[string]any{}})
			r.log.Info("monitoring recovered: admitting again")
		}
		m.consecutive, m.first = 0, ""
		r.metrics.MonitoringCoreConsecutive.Set(0)
		return
	}
	if m.consecutive == 0 {
		m.first = failed[0]
	}
	m.consecutive++
	m.failures++
	r.metrics.MonitoringCoreFailures.Inc()
	r.metrics.MonitoringCoreConsecutive.Set(float64(m.consecutive))
	if m.degraded == "" && m.consecutive >= r.cfg.Controller.MonitorFailureLimit {
		m.degraded = m.first
		r.metrics.MonitoringDegraded.Set(1)
		r.journalEvent(journal.Event{Name: journal.EventMonitoringDegraded, At: r.now(),
			Fields: map[string]any{"stage": m.first, "class": "", "core_consecutive": m.consecutive}})
		r.log.Error("monitoring degraded: new requests are refused until a monitor pass succeeds", "stage", m.first)
	}
}

// degradedReason is "" or the readiness reason while degraded.
func (r *Router) degradedReason() string {
	r.mon.mu.Lock()
	defer r.mon.mu.Unlock()
	if r.mon.degraded == "" {
		return ""
	}
	return fmt.Sprintf("monitoring degraded: %s", r.mon.degraded)
}

// monitoringState is /narwhal/state.monitoring.
func (r *Router) monitoringState() routerdoc.MonitoringState {
	m := &r.mon
	m.mu.Lock()
	defer m.mu.Unlock()
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
	r.sat.mu.Lock()
	lag := r.sat.lag.Seconds()
	r.sat.mu.Unlock()
	return routerdoc.MonitoringState{Degraded: m.degraded != "", Reason: reason, CoreConsecutive: m.consecutive,
		CoreFailures: m.failures, EventLoopLagS: lag, Stages: stages}
}

package lifecycle

import (
	"fmt"
	"sort"
)

// Holds keep out engines that answer /health but must not serve: another
// build than the fleet's, a KV layout its peers refuse at the NIXL
// handshake, or a refusal of the router's credential. Unlike the breaker's
// ejections they apply even to the last engine of a role (serving through
// it fails every request anyway), and each is lifted only by evidence that
// its cause is gone.

// Hold causes.
const (
	// HoldIncompatibleBuild: the engine's /version is not the fleet's build
	// (engine_contract.vllm_version, or on an uncontracted fleet the
	// version most engines run).
	HoldIncompatibleBuild = "incompatible-build"
	// HoldIncompatibleKV: a NIXL handshake refused KV between the engine
	// and a peer (the compatibility hashes differ) and the engine is the
	// odd one out.
	HoldIncompatibleKV = "incompatible-kv"
	// HoldEngineAuth: the engine answered 401 or 403 to the router's
	// credential.
	HoldEngineAuth = "engine-auth"
)

// HoldCauses lists every cause, for zero-valued metrics.
var HoldCauses = []string{HoldIncompatibleBuild, HoldIncompatibleKV, HoldEngineAuth}

// Hold is one reason an engine is held out.
type Hold struct {
	IID    string  `json:"iid"`
	Cause  string  `json:"cause"`
	Detail string  `json:"detail"` // what was seen and how to fix it
	Since  float64 `json:"since"`  // router seconds
	start  float64 // the accepted process start when the hold began
}

// holdState is the manager's hold bookkeeping.
type holdState struct {
	held    map[string]map[string]Hold // iid → cause → hold
	version map[string]string          // iid → the /version last seen
	hash    map[string]string          // iid → NIXL compatibility hash learned from a refusal
	build   string                     // the fleet's build, once decided (uncontracted fleets)
}

func newHoldState() holdState {
	return holdState{held: map[string]map[string]Hold{}, version: map[string]string{}, hash: map[string]string{}}
}

// hold holds iid out for cause; true when the hold is new. A repeat
// only refreshes the detail.
func (m *Manager) hold(iid, cause, detail string, now float64) bool {
	e := m.engines[iid]
	if e == nil {
		return false
	}
	hs := m.holds.held[iid]
	if hs == nil {
		hs = map[string]Hold{}
		m.holds.held[iid] = hs
	}
	if h, ok := hs[cause]; ok {
		h.Detail = detail
		hs[cause] = h
		return false
	}
	h := Hold{IID: iid, Cause: cause, Detail: detail, Since: now}
	if e.identity != nil {
		h.start = e.identity.ProcessStart
	}
	hs[cause] = h
	return true
}

func (m *Manager) release(iid, cause string) bool {
	if _, ok := m.holds.held[iid][cause]; !ok {
		return false
	}
	delete(m.holds.held[iid], cause)
	return true
}

// held reports whether any hold keeps iid out.
func (m *Manager) held(iid string) bool { return len(m.holds.held[iid]) > 0 }

// Hold holds iid out for cause with detail at router time now; true when
// the hold is new.
func (m *Manager) Hold(iid, cause, detail string, now float64) bool {
	return m.hold(iid, cause, detail, now)
}

// Release lifts iid's hold for cause; true when there was one.
func (m *Manager) Release(iid, cause string) bool {
	return m.release(iid, cause)
}

// Holds lists every hold, sorted by iid and cause.
func (m *Manager) Holds() []Hold {
	out := []Hold{}
	for _, iid := range m.order {
		for _, h := range m.holds.held[iid] {
			out = append(out, h)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].IID != out[j].IID {
			return out[i].IID < out[j].IID
		}
		return out[i].Cause < out[j].Cause
	})
	return out
}

// Held lists the engines with at least one hold, sorted.
func (m *Manager) Held() []string {
	var out []string
	for _, iid := range m.order {
		if m.held(iid) {
			out = append(out, iid)
		}
	}
	return out
}

// Build is the fleet's build: engine_contract.vllm_version when declared,
// else the version most engines reported ("" before any did).
func (m *Manager) Build() string {
	return m.build()
}

func (m *Manager) build() string {
	if m.contract != nil && m.contract.VLLMVersion != "" {
		return m.contract.VLLMVersion
	}
	return m.holds.build
}

// ObserveVersion records the /version iid answered at router time now and
// applies the build rule to every engine: one whose last seen version is
// not the fleet's build is held as incompatible-build, one that matches
// again is released.
//
// Without a contract the fleet's build is the version most engines last
// reported. A tie keeps the build already decided, so one engine
// restarted as another build never outvotes a two-engine fleet; the first
// decision is the most common version of the first observations (the
// router feeds its start-up identities in iid order, so a tie there goes
// to the first engine). A whole fleet restarted as a new build moves the
// build once most engines run it.
func (m *Manager) ObserveVersion(iid, version string, now float64) {
	if m.engines[iid] == nil || version == "" {
		return
	}
	m.holds.version[iid] = version
	m.decideBuild()
	build := m.build()
	for _, id := range m.order {
		v, seen := m.holds.version[id]
		switch {
		case !seen:
		case v != build:
			m.hold(id, HoldIncompatibleBuild, fmt.Sprintf("runs vLLM %s, the fleet's build is %s: NIXL refuses KV between builds; restart it with vLLM %s", v, build, build), now)
		default:
			m.release(id, HoldIncompatibleBuild)
		}
	}
}

// decideBuild moves the uncontracted build to a strict majority.
func (m *Manager) decideBuild() {
	count := map[string]int{}
	for _, id := range m.order {
		if v, ok := m.holds.version[id]; ok {
			count[v]++
		}
	}
	best, n, tie := "", 0, false
	for _, id := range m.order { // iid order: deterministic
		v, ok := m.holds.version[id]
		switch {
		case !ok || v == best:
		case count[v] > n:
			best, n, tie = v, count[v], false
		case count[v] == n:
			tie = true
		}
	}
	switch {
	case m.holds.build == "":
		m.holds.build = best // the first decision: ties go to the earliest engine
	case !tie && best != "" && n > count[m.holds.build]:
		m.holds.build = best
	}
}

// KVRefused records that consumer refused producer's KV at the NIXL
// handshake, with the hashes the consumer reported (either may be ""),
// and holds out the odd engine of the pair as incompatible-kv. It returns
// the engine held.
//
// The odd engine is the one whose hash fewer engines share, among the
// engines whose hash a refusal revealed; on a tie, the one whose accepted
// process started last (the fleet was compatible before, so the engine
// that changed is the suspect); failing that, the consumer. An engine held
// earlier whose hash turns out to be the majority's is released.
func (m *Manager) KVRefused(consumer, producer, localHash, remoteHash string, now float64) string {
	if m.engines[consumer] == nil || m.engines[producer] == nil {
		return ""
	}
	if localHash != "" {
		m.holds.hash[consumer] = localHash
	}
	if remoteHash != "" {
		m.holds.hash[producer] = remoteHash
	}
	odd := m.odd(consumer, producer)
	detail := fmt.Sprintf("the NIXL handshake between %s (compatibility hash %s) and %s (%s) refused KV: "+
		"this engine was launched with another model, dtype, attention backend, KV-cache dtype or connector than its peers; relaunch it like them",
		consumer, short(m.holds.hash[consumer]), producer, short(m.holds.hash[producer]))
	m.hold(odd, HoldIncompatibleKV, detail, now)
	oddShare := m.share(m.holds.hash[odd])
	for _, id := range m.order { // engines of the majority's hash were not the odd ones after all
		if h := m.holds.hash[id]; id != odd && h != "" && m.share(h) > oddShare {
			m.release(id, HoldIncompatibleKV)
		}
	}
	return odd
}

// odd picks the engine of a refused pair to hold out.
func (m *Manager) odd(consumer, producer string) string {
	hc, hp := m.holds.hash[consumer], m.holds.hash[producer]
	if hc != "" && hp != "" && hc != hp {
		switch nc, np := m.share(hc), m.share(hp); {
		case nc < np:
			return consumer
		case np < nc:
			return producer
		}
	}
	if m.start(producer) > m.start(consumer) {
		return producer
	}
	return consumer
}

// share counts the engines known to run hash h.
func (m *Manager) share(h string) int {
	n := 0
	for _, v := range m.holds.hash {
		if v == h && h != "" {
			n++
		}
	}
	return n
}

func (m *Manager) start(iid string) float64 {
	if e := m.engines[iid]; e != nil && e.identity != nil {
		return e.identity.ProcessStart
	}
	return 0
}

// NewProcess lifts iid's incompatible-kv hold when the engine now runs
// another process than the one held (a relaunch may have fixed its
// layout; a crossed leg would find out again), and forgets its learned
// hash. start is the process start just observed.
func (m *Manager) NewProcess(iid string, start float64) bool {
	h, ok := m.holds.held[iid][HoldIncompatibleKV]
	if !ok || start <= 0 || start == h.start {
		return false
	}
	delete(m.holds.hash, iid)
	return m.release(iid, HoldIncompatibleKV)
}

// clearHolds lifts every hold of iid: a lifecycle readmission proved
// its health, credential, build and a KV transfer.
func (m *Manager) clearHolds(iid string) {
	delete(m.holds.held, iid)
	delete(m.holds.hash, iid)
}

func short(h string) string {
	switch {
	case h == "":
		return "unknown"
	case len(h) > 12:
		return h[:12] + "…"
	}
	return h
}

// Package tierd derives each fleet endpoint's output tier from the
// evidence store (ADR-006 §4): an endpoint is one engine of the fleet at
// the execution fingerprint its latest preflight boot record names. The
// decision lists its basis (records by digest) and, for the next tier,
// exactly what is missing.
//
// It is deterministic: the time comes in as AsOf, the release index as
// data, and records are read in digest order, so the same store and the
// same AsOf give a byte-identical report.
package tierd

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/decision"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/evidence/vllmrel"
)

// Report schema.
const (
	Schema        = "narwhal.evidence-tiers"
	SchemaVersion = 1
)

// Input is what tiers are derived from.
type Input struct {
	Store    *store.Store
	Records  []store.Stored
	Engines  []string // fleet engine iids, in fleet order
	Model    string
	AsOf     time.Time
	Releases vllmrel.Index
	// Advisories are the store's imported security advisories; nil when
	// none was imported (security freshness is then unknown).
	Advisories []evidence.Advisory
	// Request is the DecisionRequest revision to judge against; "" takes
	// the newest accepted one for Model.
	Request string
	// Plan, when set, is a prediction record naming the artifact and
	// hardware class (for engines with no boot record yet).
	Plan string
}

// Report is every endpoint's tier.
type Report struct {
	Schema        string     `json:"schema"`
	SchemaVersion int        `json:"schema_version"`
	AsOf          string     `json:"as_of"`
	ReleaseIndex  string     `json:"release_index"`
	Request       *string    `json:"decision_request"`
	Notes         []string   `json:"notes"`
	Endpoints     []Endpoint `json:"endpoints"`
}

// Endpoint is one engine's tier decision.
type Endpoint struct {
	Engine        string                 `json:"engine"`
	Endpoint      string                 `json:"endpoint"`
	EngineVersion string                 `json:"engine_version"`
	Artifact      string                 `json:"artifact"`
	HardwareClass string                 `json:"hardware_class"`
	Application   string                 `json:"application"`
	Tier          evidence.Tier          `json:"tier"`
	Basis         []string               `json:"basis"`
	Missing       []evidence.Requirement `json:"missing"`
	MissingText   []string               `json:"missing_text"`
	Contested     []Contest              `json:"contested"`
	Stale         []string               `json:"stale"`
	States        []State                `json:"states"`
	Previous      []string               `json:"previous_endpoints"`
	Notes         []string               `json:"notes"`
	MarginBytes   float64                `json:"margin_bytes"`
}

// Contest is a contested conflict key with every record shown.
type Contest struct {
	Key     string   `json:"key"`
	Records []string `json:"records"`
	Notes   []string `json:"notes"`
}

// State is an endpoint evidence state and the records behind it.
type State struct {
	State   string   `json:"state"`
	Records []string `json:"records"`
}

// Derive computes the report.
func Derive(in Input) (Report, error) {
	_, ixDigest, err := in.Releases.Canonical()
	if err != nil {
		return Report{}, fmt.Errorf("release index: %w", err)
	}
	rep := Report{Schema: Schema, SchemaVersion: SchemaVersion, AsOf: in.AsOf.UTC().Format(time.RFC3339), ReleaseIndex: ixDigest,
		Notes: []string{}, Endpoints: []Endpoint{}}
	app, notes := application(in)
	rep.Notes = append(rep.Notes, notes...)
	if app != "" {
		rep.Request = &app
	}
	var plan *evidence.Record
	if in.Plan != "" {
		if plan = find(in.Records, in.Plan); plan == nil {
			return Report{}, fmt.Errorf("--plan %s is not in the evidence store", in.Plan)
		}
	}
	res, err := resolutions(in.Records)
	if err != nil {
		return Report{}, err
	}
	for _, iid := range in.Engines {
		ep, err := endpoint(in, res, plan, app, iid)
		if err != nil {
			return Report{}, fmt.Errorf("engine %s: %w", iid, err)
		}
		rep.Endpoints = append(rep.Endpoints, ep)
	}
	return rep, nil
}

// application is the accepted DecisionRequest the endpoints are judged
// against: an unaccepted one is named and consumes nothing.
func application(in Input) (string, []string) {
	app, err := decision.ChooseRequest(in.Store, in.Records, in.Model, in.Request)
	if err != nil {
		return "", []string{err.Error()}
	}
	return app, nil
}

func find(records []store.Stored, digest string) *evidence.Record {
	for i := range records {
		if records[i].Digest == digest {
			return &records[i].Record
		}
	}
	return nil
}

// resolutions maps each conflict key to its resolution.
func resolutions(records []store.Stored) (map[string]evidence.Resolution, error) {
	rs := make([]evidence.Record, len(records))
	for i, s := range records {
		rs[i] = s.Record
	}
	res, err := evidence.Resolve(rs)
	if err != nil {
		return nil, err
	}
	out := map[string]evidence.Resolution{}
	for _, r := range res {
		out[r.Key] = r
	}
	return out, nil
}

// Current is the engine's latest boot record: the execution it runs now.
func Current(records []store.Stored, iid string) (store.Stored, bool) {
	bs := boots(records, iid)
	if len(bs) == 0 {
		return store.Stored{}, false
	}
	return bs[len(bs)-1], true
}

// boots are the engine's boot records, oldest first.
func boots(records []store.Stored, iid string) []store.Stored {
	var out []store.Stored
	for _, s := range records {
		if s.Record.Kind == evidence.KindBoot && s.Record.Display["engine_iid"] == iid && s.Record.Subject[evidence.SubjectEndpoint] != "" {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := observed(out[i].Record), observed(out[j].Record)
		return a.Before(b) || a.Equal(b) && out[i].Digest < out[j].Digest
	})
	return out
}

var missingText = map[evidence.Requirement]string{
	evidence.NeedFittingPrediction:    "a narwhal plan prediction that fits, for this artifact and hardware class",
	evidence.NeedMargin:               "the prediction's margin at least the stated margin",
	evidence.NeedBootSameHardware:     "a healthy boot record (narwhal-check) on the same hardware class for this artifact",
	evidence.NeedBootCurrentEngine:    "a fresh healthy boot record at the execution fingerprint the engine runs now (re-run narwhal-check)",
	evidence.NeedServing:              "a fresh serving record meeting the accepted SLO (narwhal evidence from-journal)",
	evidence.NeedTask:                 "a fresh task record meeting an accepted suite's quality floor (narwhal evidence task-run)",
	evidence.NeedAcceptedRequest:      "an accepted DecisionRequest (narwhal evidence propose, then accept by another principal)",
	evidence.NeedUncontested:          "no contested record: resolve the disagreement with new evidence (nothing auto-resolves)",
	evidence.NeedExactReproduction:    "qualified_solution is reserved (ADR-011): exact-solution task reproduction, never emitted in this phase",
	evidence.NeedEveryServingRequired: "every applicable serving constraint met, within a disclosed comparable set",
	evidence.NeedSameFingerprint:      "evidence at the current fingerprint: the engine's execution changed, and old records stay tied to the old one",
}

func texts(ms []evidence.Requirement) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, string(m)+": "+missingText[m])
	}
	return out
}

func shortFP(d string) string {
	if len(d) > 16 {
		return d[:16]
	}
	return d
}

func joinVersions(old, cur store.Stored) string {
	return fmt.Sprintf("fingerprint changed: %s (vllm %s) -> %s (vllm %s); records on the old fingerprint stay tied to it",
		shortFP(old.Record.Subject[evidence.SubjectEndpoint]), old.Record.Engine.Version,
		shortFP(cur.Record.Subject[evidence.SubjectEndpoint]), cur.Record.Engine.Version)
}

func hasPrefix(s string, ps ...string) bool {
	for _, p := range ps {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

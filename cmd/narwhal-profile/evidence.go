package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/check"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/profile/sweep"
	"github.com/narwhal-go/narwhal/internal/version"
)

// engineRecord is one engine's line in JSON data.evidence.
type engineRecord struct {
	Engine    string `json:"engine"`
	Execution string `json:"execution_fingerprint"`
	Record    string `json:"record"`
}

// writeEvidence stores one workload record per profiled engine
// (evidence.md §4.3): claim_scope serving_performance, epistemic_status
// derived (a fit), freshness per engine minor (the workload kind's clock).
// Its subject is the execution fingerprint narwhal-check's records use; its
// inputs are the samples file and the verified attestation. dir "" writes
// none.
func writeEvidence(cfg *fleet.Config, results []sweep.Result, samplesPath, dir string) ([]engineRecord, error) {
	if dir == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(samplesPath)
	if err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	samples := canon.Digest(raw)
	st := store.Open(dir)
	var out []engineRecord
	for _, r := range results {
		if r.Row == nil {
			continue
		}
		rec, fp, err := workloadRecord(cfg, r, samples)
		if err != nil {
			return out, fmt.Errorf("evidence for engine %s: %w", r.Row.IID, err)
		}
		d, err := st.PutRecord(rec)
		if err != nil {
			return out, fmt.Errorf("evidence for engine %s: %w", r.Row.IID, err)
		}
		out = append(out, engineRecord{Engine: r.Row.IID, Execution: fp, Record: d})
	}
	return out, nil
}

func workloadRecord(cfg *fleet.Config, r sweep.Result, samplesDigest string) (evidence.Record, string, error) {
	g := r.Samples.Before
	x := check.Execution{EngineVersion: g.Identity.Version, Hardware: cfg.Hardware}
	inputs := []string{samplesDigest}
	if len(g.Attestation) > 0 {
		var p attest.Payload
		if err := json.Unmarshal(g.Attestation, &p); err != nil {
			return evidence.Record{}, "", fmt.Errorf("attestation in the samples: %w", err)
		}
		x.Contract = &p.Contract
		inputs = append(inputs, p.AttestationDigest)
	}
	fp, err := x.Fingerprint()
	if err != nil {
		return evidence.Record{}, "", err
	}
	var display map[string]any
	b, _ := json.Marshal(r.Row)
	if err := json.Unmarshal(b, &display); err != nil {
		return evidence.Record{}, "", err
	}
	display["engine_iid"] = r.Row.IID
	verdict := evidence.VerdictPass
	rec := evidence.Record{Kind: evidence.KindWorkload, ClaimScope: evidence.ScopeServingPerformance,
		EpistemicStatus: evidence.Derived, Level: evidence.MaintainerLabMeasured,
		Subject: map[string]string{evidence.SubjectEndpoint: fp},
		Claim: evidence.Claim{Quantity: "profile_decode_fit_mape", Verdict: &verdict, Value: r.Row.DecodeFitMAPE, Unit: "ratio",
			Tolerance: cfg.Profiles.MaxDecodeFitMAPE},
		Engine:     evidence.Engine{Name: "vllm", Version: g.Identity.Version, Packages: []string{}},
		Provenance: evidence.Provenance{Producer: "narwhal-profile", ProducerVersion: version.String(), Inputs: inputs},
		Display:    display}
	return evidence.Stamp(rec, ports.SystemClock()), fp, nil
}

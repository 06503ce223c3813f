package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/decision"
	"github.com/narwhal-go/narwhal/internal/evidence/sign"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// The fleet the journal is of: two prefill and two decode engines, each
// with a boot record binding it to an execution fingerprint.
var engines = []string{"p0", "p1", "d0", "d1"}

const model = "m"

// request is the accepted DecisionRequest the rows are judged against.
const request = `{"schema":"narwhal.decision-request","schema_version":1,"model":"m","objective":"max_goodput",
"slo":{"ttft_s":1,"tpot_s":0.05,"attainment":0.8},"workload":{"max_input_tokens":4096,"max_output_tokens":512,"max_rate_per_s":1000,"min_samples":20},
"artifact_policy":{"artifact":""}}`

var epoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func fleetConfig() *fleet.Config {
	cfg := &fleet.Config{Model: model}
	for _, iid := range engines {
		cfg.Engines = append(cfg.Engines, fleet.Engine{IID: iid})
	}
	return cfg
}

// generate writes dir/store and the journal dir/journal.jsonl until the
// set holds o.mib MiB; it returns the rows written.
func generate(dir string, o options) (int, error) {
	if err := seedStore(store.Open(filepath.Join(dir, "store"))); err != nil {
		return 0, err
	}
	w, err := journal.Open(filepath.Join(dir, "journal.jsonl"), journal.Options{Source: "sha256:" + fmt.Sprintf("%064d", 0),
		MaxBytes: 64 << 20, Clock: ports.NewFake(epoch), Rng: ports.NewSeededRng(1)})
	if err != nil {
		return 0, err
	}
	defer w.Close()
	target := o.mib << 20
	rows := 0
	for {
		for range 10_000 {
			if err := w.Request(row(rows, o.rate)); err != nil {
				return rows, err
			}
			rows++
		}
		n, err := journal.SetBytes(filepath.Join(dir, "journal.jsonl"))
		if err != nil || n >= target {
			return rows, err
		}
	}
}

// row is the i-th request as the router writes a completed two-leg
// request: every field present, a client id and a trace id.
func row(i int, rate float64) *journal.RequestRow {
	p, d := engines[i%2], engines[2+i%2]
	in, out := 200+i%1800, 16+i%240
	ttft, tpot, first := 0.2+float64(i%50)/100, 0.02+float64(i%30)/1000, 0.18+float64(i%50)/100
	crossed := true
	return &journal.RequestRow{RID: fmt.Sprintf("rq-%016x", i), ClientRID: journal.Ptr(fmt.Sprintf("client-%08d-%s", i, "3b1f0c2e-58d4-4c1e-9f2a")),
		Arrived: float64(i) / rate, InputLen: in, InputSized: true, WantedLen: &out, OutputLen: &out,
		TTFT: &ttft, TPOT: &tpot, FirstByte: &first, DecodeTPOT: &tpot, Price: &journal.Price{PriceS: 0.3, OwnPrefillS: 0.2},
		DurationS: ttft + float64(out)*tpot, Attempts: 1, DecodeTries: 1, DecodeTokensObserved: out,
		UpstreamSeconds: journal.UpstreamSeconds{Prefill: ttft, Decode: float64(out) * tpot},
		PrefillIID:      &p, DecodeIID: &d, Crossed: &crossed, CachedTokens: map[string]int{p: 0},
		TraceID: journal.Ptr(fmt.Sprintf("%032x", i)), Terminal: journal.TerminalCompleted}
}

// seedStore puts the accepted request and a boot record per engine.
func seedStore(st *store.Store) error {
	_, raw, err := decision.ParseRequest([]byte(request))
	if err != nil {
		return err
	}
	rev, err := st.PutDocument(raw)
	if err != nil {
		return err
	}
	clock := ports.NewFake(epoch)
	agent, _ := decision.ParsePrincipal("ai_agent:planner", "cli")
	human, _ := decision.ParsePrincipal("human:op", "cli")
	if _, err := st.PutRecord(decision.Proposal(decision.KindRequest, rev, agent, clock)); err != nil {
		return err
	}
	rs, err := st.Records()
	if err != nil {
		return err
	}
	acc, err := decision.Accept(rs, rev, human, clock)
	if err != nil {
		return err
	}
	d, err := st.PutRecord(acc)
	if err != nil {
		return err
	}
	// An acceptance counts only signed by a key registered for its
	// principal: a fixed key for the bench's operator.
	key, err := sign.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{7}, 64)))
	if err != nil {
		return err
	}
	if _, err := st.AddPrincipalKey(human.String(), key.Public); err != nil {
		return err
	}
	if err := st.Sign(d, key); err != nil {
		return err
	}
	for _, iid := range engines {
		if _, err := st.PutRecord(boot(iid, clock)); err != nil {
			return err
		}
	}
	return nil
}

func boot(iid string, clock ports.Clock) evidence.Record {
	healthy := evidence.VerdictHealthy
	r := evidence.Record{Kind: evidence.KindBoot, ClaimScope: evidence.ScopeBoot, EpistemicStatus: evidence.Measured,
		Level: evidence.MaintainerLabMeasured, Subject: map[string]string{evidence.SubjectEndpoint: "fp-" + iid},
		Claim:      evidence.Claim{Quantity: "boot", Verdict: &healthy},
		Engine:     evidence.Engine{Name: "vllm", Version: "0.21.0", Packages: []string{}},
		Provenance: evidence.Provenance{Producer: "bench/evidence-pass", Inputs: []string{}},
		Display:    map[string]any{"engine_iid": iid}}
	return evidence.Stamp(r, clock)
}

package probe_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/probe"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

// TestKVTransfer: a directed e0 → e1 probe between simengines, passing
// and failing in each way preflight's consume gate reports (failure_kind)
// and the router's kv_transfer readmission gate fails on.
func TestKVTransfer(t *testing.T) {
	const fast = `"health_timeout_s":0.3,"first_token_timeout_s":0.1`
	tests := []struct {
		name    string
		faults  [2]simengine.Faults
		engine  string // the engine block's fields
		serving string // the serving block's fields
		probe   probe.Transfer
		kind    string // "" passes
		message string
	}{
		{name: "passes with a reference run", probe: probe.Transfer{Tokens: 4, Reference: true}},
		{name: "corrupted KV differs from the reference", faults: [2]simengine.Faults{{CorruptKV: true}, {}},
			probe: probe.Transfer{Reference: true}, kind: probe.KindOutputMismatch, message: "the KV arrived corrupted; do not route this pair"},
		{name: "without a reference only tokens count", faults: [2]simengine.Faults{{CorruptKV: true}, {}}},
		{name: "producer fails", faults: [2]simengine.Faults{{HTTP500Rate: 1}, {}},
			kind: probe.KindTransferFailed, message: "prefill leg on e0: engine answered HTTP 500"},
		{name: "consumer fails", faults: [2]simengine.Faults{{}, {HTTP500Rate: 1}},
			kind: probe.KindTransferFailed, message: "decode leg on e1: engine answered HTTP 500"},
		{name: "consumer silent past the first-token bound", faults: [2]simengine.Faults{{}, {StallSeconds: 1}}, engine: fast,
			kind: probe.KindFirstTokenDeadline, message: "first-token deadline 0.3s expired; transfer remains unconfirmed"},
		{name: "request deadline", faults: [2]simengine.Faults{{}, {StallSeconds: 3}}, engine: `"health_timeout_s":2,"first_token_timeout_s":0.1`,
			serving: `"request_timeout_s":0.6,"prefill_timeout_s":0.6`,
			kind:    probe.KindRequestDeadline, message: "request deadline 0.6s expired (serving.request_timeout_s)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := startFleet(t, 2, nil)
			p := newProber(t, f.config(t, tc.engine, tc.serving), probe.Options{})
			for i, fl := range tc.faults {
				if err := f.engines[i].SetFaults(fl); err != nil {
					t.Fatal(err)
				}
			}
			res, err := p.KVTransfer(context.Background(), "e0", "e1", tc.probe)
			if tc.kind == "" {
				if err != nil || res.Tokens == 0 || res.Text == "" || res.FirstToken <= 0 || res.Handoff == nil {
					t.Fatalf("KVTransfer = %+v, %v; want tokens, text, a first-token time and the handoff", res, err)
				}
				if tc.probe.Tokens > 0 && res.Tokens != tc.probe.Tokens {
					t.Fatalf("decoded %d tokens, want exactly %d", res.Tokens, tc.probe.Tokens)
				}
				return
			}
			var te *probe.TransferError
			if !errors.As(err, &te) || te.Kind != tc.kind || te.Src != "e0" || te.Dst != "e1" || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("KVTransfer error %v (%+v); want %s with %q", err, te, tc.kind, tc.message)
			}
		})
	}
}

// TestProduce: a producer leg alone returns the handoff preflight's
// produce gate lists.
func TestProduce(t *testing.T) {
	f := startFleet(t, 1, nil)
	p := newProber(t, f.config(t, ""), probe.Options{})
	h, e := p.Produce(context.Background(), "e0", probe.Transfer{})
	if e != nil || h.EngineID == "" || len(h.Params) == 0 {
		t.Fatalf("Produce = %+v, %v", h, e)
	}
	_ = f.engines[0].SetFaults(simengine.Faults{HTTP500Rate: 1})
	if _, e := p.Produce(context.Background(), "e0", probe.Transfer{}); e == nil || fault.As(e).Status != 500 {
		t.Fatalf("a failing producer: %v", e)
	}
}

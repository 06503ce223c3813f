package simengine

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

type pdCase struct {
	prompt string
	max    int
}

// prefill runs a P leg on e and returns its kv_transfer_params.
func prefill(t *testing.T, e *Engine, id, prompt string) map[string]any {
	t.Helper()
	resp, b := post(t, e.URL()+"/v1/completions", map[string]any{"model": e.Model(), "prompt": prompt, "max_tokens": 1,
		"kv_transfer_params": map[string]any{"do_remote_decode": true, "do_remote_prefill": false, "remote_engine_id": nil,
			"remote_block_ids": nil, "remote_host": nil, "remote_port": nil}}, "X-Request-Id", id)
	var r struct {
		KVP map[string]any `json:"kv_transfer_params"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &r) != nil || r.KVP == nil {
		t.Fatalf("prefill leg: %d %s", resp.StatusCode, b)
	}
	for _, k := range []string{"remote_engine_id", "remote_block_ids", "remote_request_id", "remote_host", "remote_port", "tp_size", "remote_num_tokens"} {
		if _, ok := r.KVP[k]; !ok {
			t.Fatalf("prefill params lack %s: %v", k, r.KVP)
		}
	}
	if r.KVP["do_remote_prefill"] != true || r.KVP["do_remote_decode"] != false ||
		!strings.HasPrefix(r.KVP["remote_request_id"].(string), "cmpl-"+id+"-0-") {
		t.Fatalf("prefill params %v", r.KVP)
	}
	return r.KVP
}

// decodeStream runs a streaming D leg and returns its text, finish reason
// and whether an error event arrived.
func decodeStream(t *testing.T, e *Engine, id, prompt string, max int, kvp map[string]any) (string, string, string) {
	t.Helper()
	kvp["some_future_key"] = "tolerated"
	resp, b := post(t, e.URL()+"/v1/completions", map[string]any{"model": e.Model(), "prompt": prompt, "max_tokens": max,
		"stream": true, "kv_transfer_params": kvp}, "X-Request-Id", id)
	if resp.StatusCode != 200 {
		t.Fatalf("decode leg status %d: %s", resp.StatusCode, b)
	}
	evs := testkit.SSEData(t, b)
	errMsg := ""
	for _, ev := range evs {
		if strings.HasPrefix(ev, `{"error"`) {
			errMsg = ev
		}
	}
	if errMsg != "" {
		return "", "", errMsg
	}
	text, fin := testkit.StreamText(t, evs)
	return text, fin, ""
}

func aggregated(t *testing.T, e *Engine, prompt string, max int) string {
	t.Helper()
	resp, b := post(t, e.URL()+"/v1/completions", map[string]any{"model": e.Model(), "prompt": prompt, "max_tokens": max})
	var r struct {
		Choices []struct{ Text string } `json:"choices"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &r) != nil {
		t.Fatalf("aggregated: %d %s", resp.StatusCode, b)
	}
	return r.Choices[0].Text
}

func failedTransfers(e *Engine) float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.met.counters["vllm:nixl_num_failed_transfers_total"][""]
}

func TestPDMatchesAggregated(t *testing.T) {
	a, b := startEngine(t, nil), startEngine(t, nil)
	for i, c := range []pdCase{{"The quick brown fox jumps over the lazy dog", 12}, {"x", 1}, {strings.Repeat("long prompt ", 200), 30}} {
		id := "pd-" + string(rune('a'+i))
		kvp := prefill(t, a, id, c.prompt)
		text, fin, errMsg := decodeStream(t, b, id, c.prompt, c.max, kvp)
		if errMsg != "" {
			t.Fatalf("decode failed: %s", errMsg)
		}
		if want := aggregated(t, a, c.prompt, c.max); text != want || fin != "length" {
			t.Errorf("disaggregated %q (%s), aggregated %q", text, fin, want)
		}
	}
	if st := a.State(); st.Leases != 0 {
		t.Errorf("producer still holds %d leases after the reads", st.Leases)
	}
}

func TestPDFailures(t *testing.T) {
	prompt := "The quick brown fox jumps over the lazy dog"
	cases := []struct {
		name    string
		mutateB func(*Config)
		between func(t *testing.T, a *Engine, kvp map[string]any)
		wantErr string
		corrupt bool
	}{
		{name: "producer restarted", between: func(_ *testing.T, a *Engine, _ map[string]any) { a.Restart() }, wantErr: "engine ID mismatch"},
		{name: "compatibility mismatch", mutateB: func(c *Config) { c.Compat = DefaultCompat(c.Model); c.Compat.CacheDType = "fp8" }, wantErr: "compatibility hash mismatch"},
		{name: "unreachable producer", between: func(_ *testing.T, _ *Engine, kvp map[string]any) { kvp["remote_port"] = float64(1) }, wantErr: "handshake"},
		{name: "already read", between: func(t *testing.T, a *Engine, kvp map[string]any) {
			a.mu.Lock()
			a.leases = map[string]*lease{}
			a.mu.Unlock()
		}, wantErr: "holds no KV blocks"},
		{name: "corrupt KV", between: func(t *testing.T, a *Engine, _ map[string]any) {
			if err := a.SetFaults(Faults{CorruptKV: true}); err != nil {
				t.Fatal(err)
			}
		}, corrupt: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := startEngine(t, nil), startEngine(t, c.mutateB)
			want := aggregated(t, a, prompt, 8)
			kvp := prefill(t, a, "f", prompt)
			if c.between != nil {
				c.between(t, a, kvp)
			}
			text, _, errMsg := decodeStream(t, b, "f", prompt, 8, kvp)
			if c.corrupt {
				if errMsg != "" || text == want {
					t.Fatalf("corrupt transfer: err %q, text %q equals aggregated", errMsg, text)
				}
				return
			}
			if !strings.Contains(errMsg, c.wantErr) || !strings.Contains(errMsg, "InternalServerError") {
				t.Fatalf("error event %q, want %q", errMsg, c.wantErr)
			}
			if failedTransfers(b) != 1 {
				t.Errorf("failed transfers = %v, want 1", failedTransfers(b))
			}
			// Non-streaming decode legs fail with HTTP 500 before any body.
			resp, body := post(t, b.URL()+"/v1/completions", map[string]any{"model": b.Model(), "prompt": prompt, "max_tokens": 2, "kv_transfer_params": kvp})
			if resp.StatusCode != 500 {
				t.Errorf("non-streaming failed decode: %d %s", resp.StatusCode, body)
			}
		})
	}
}

func TestLeaseExpiry(t *testing.T) {
	clk := ports.NewFake(time.Unix(1_700_000_000, 0))
	a := startEngine(t, func(c *Config) { c.Clock = clk })
	b := startEngine(t, nil)
	prompt := "lease me"
	done := make(chan map[string]any, 1)
	go func() { done <- prefillNoT(a, prompt) }()
	kvp := advanceUntil(t, clk, done)
	if kvp == nil {
		t.Fatal("prefill leg failed")
	}
	if a.State().Leases != 1 {
		t.Fatal("no lease held")
	}
	waitFor(t, func() bool { _, ok := clk.NextDeadline(); return ok })
	clk.Advance(30 * time.Second)
	waitFor(t, func() bool { return a.State().Leases == 0 })
	a.mu.Lock()
	expired := a.met.counters["vllm:nixl_num_kv_expired_reqs_total"][""]
	a.mu.Unlock()
	if expired != 1 {
		t.Fatalf("expired leases = %v, want 1", expired)
	}
	if _, _, errMsg := decodeStream(t, b, "x", prompt, 4, kvp); !strings.Contains(errMsg, "holds no KV blocks") {
		t.Fatalf("decode after expiry: %q", errMsg)
	}
}

func prefillNoT(e *Engine, prompt string) map[string]any {
	resp, err := client.Post(e.URL()+"/v1/completions", "application/json", strings.NewReader(
		`{"model":"sim-model","prompt":"`+prompt+`","max_tokens":1,"kv_transfer_params":{"do_remote_decode":true}}`))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var r struct {
		KVP map[string]any `json:"kv_transfer_params"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&r)
	return r.KVP
}

// advanceUntil moves the fake clock to each pending deadline until done
// delivers, bounded in steps and wall time.
func advanceUntil[T any](t *testing.T, clk *ports.Fake, done <-chan T) T {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 10000 && time.Now().Before(deadline); i++ {
		select {
		case v := <-done:
			return v
		case <-time.After(time.Millisecond):
		}
		if at, ok := clk.NextDeadline(); ok && at.Sub(clk.Now()) < 10*time.Second {
			clk.Set(at)
		}
	}
	t.Fatal("request did not finish under the fake clock")
	var zero T
	return zero
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 5000; i++ {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("condition not reached in 5 s")
}

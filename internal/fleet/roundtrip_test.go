package fleet

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// genDocument draws a valid fleet document: engines with unique iids and
// arbitrary text, every section's fields within their ranges, optional
// sections present or not.
func genDocument(t *rapid.T) map[string]any {
	n := rapid.IntRange(1, 6).Draw(t, "engines")
	engines := make([]any, n)
	for i := range engines {
		e := map[string]any{
			"iid": fmt.Sprintf("%s-%d", rapid.String().Draw(t, "iid"), i),
			"url": rapid.StringMatching(`https?://([a-z0-9.-]{1,12}|\[::1\]|\[fd00::[0-9a-f]{1,4}\])(:[0-9]{1,5})?(/[a-z0-9.é$]{0,8}){0,3}/{0,3}`).Draw(t, "url"),
		}
		if rapid.Bool().Draw(t, "has_role") {
			e["role"] = rapid.SampledFrom([]string{"prefill", "decode"}).Draw(t, "role")
		}
		if rapid.Bool().Draw(t, "has_pin") {
			e["pin"] = rapid.Bool().Draw(t, "pin")
		}
		if rapid.Bool().Draw(t, "has_att") {
			e["attestation_url"] = rapid.StringMatching(`(https?://[a-z0-9.]{1,10}(/[a-z0-9.]{0,6}){0,2}/?)?`).Draw(t, "att")
		}
		engines[i] = e
	}
	pos := func(label string, hi float64) float64 { return rapid.Float64Range(1e-6, hi).Draw(t, label) }
	doc := map[string]any{
		"schema": Schema, "schema_version": 1,
		"model":   rapid.String().Draw(t, "model"),
		"engines": engines,
		"slo":     map[string]any{"ttft_s": pos("ttft", 100), "tpot_s": pos("tpot", 10)},
	}
	margin := rapid.Float64Range(0.05, 0.9).Draw(t, "margin")
	window := rapid.Float64Range(10, 1000).Draw(t, "window")
	maxSpan := rapid.Float64Range(1, window).Draw(t, "max_span")
	shrink := rapid.Float64Range(0, 0.9).Draw(t, "shrink")
	if !rapid.Bool().Draw(t, "has_controller") {
		margin = Defaults().Controller.Reactive.MovementMargin
	} else {
		doc["controller"] = map[string]any{
			"monitor_interval_s": rapid.Float64Range(0.01, 1).Draw(t, "interval"),
			"advisory":           rapid.Bool().Draw(t, "advisory"),
			"flip_history":       rapid.IntRange(1, 1<<20).Draw(t, "flips"),
			"thresholds": map[string]any{
				"expand": rapid.Float64Range(shrink+0.01, 5).Draw(t, "expand"), "shrink": shrink,
				"cooldown_s": pos("cooldown", 100), "dwell_s": pos("dwell", 100),
				"panic_ratio": rapid.SampledFrom([]float64{0, 1, 2.5}).Draw(t, "panic"),
			},
			"reactive": map[string]any{
				"window_s": window, "evidence_max_span_s": maxSpan,
				"evidence_span_s": rapid.Float64Range(0.5, maxSpan).Draw(t, "span"),
				"movement_margin": margin, "utilization": rapid.Float64Range(0.1, 1).Draw(t, "util"),
			},
		}
	}
	if rapid.Bool().Draw(t, "has_serving") {
		attempts := rapid.IntRange(1, 3).Draw(t, "attempts")
		doc["serving"] = map[string]any{
			"admission":          rapid.SampledFrom([]string{"predictive", "open"}).Draw(t, "admission"),
			"max_connections":    rapid.IntRange(1, 100000).Draw(t, "maxconn"),
			"graceful_timeout_s": rapid.IntRange(0, 600).Draw(t, "graceful"),
			"max_attempts":       attempts,
			"handoff_timeout_s":  pos("handoff", 30),
		}
	}
	if rapid.Bool().Draw(t, "has_engine") {
		doc["engine"] = map[string]any{
			"tokenize":                     rapid.Bool().Draw(t, "tokenize"),
			"engine_api_key_env":           rapid.StringMatching(`[A-Z_]{0,12}`).Draw(t, "keyenv"),
			"control_connections":          rapid.IntRange(0, 64).Draw(t, "control"),
			"first_token_calibration_path": "", // anything else is refused (not supported)
		}
	}
	if rapid.Bool().Draw(t, "has_recovery") {
		doc["recovery"] = map[string]any{
			"state_path": rapid.StringMatching(`[a-z./]{0,16}`).Draw(t, "state"),
			"resume":     rapid.Bool().Draw(t, "resume"),
		}
	}
	doc["profiles"] = map[string]any{
		"path":                rapid.StringMatching(`[a-z./]{0,16}`).Draw(t, "profiles"),
		"max_decode_fit_mape": rapid.Float64Range(0.001, margin).Draw(t, "fit"),
	}
	if rapid.Bool().Draw(t, "has_hardware") {
		apE := rapid.IntRange(1, 8).Draw(t, "ape")
		doc["hardware"] = map[string]any{"accelerator": "gpu", "accelerators_per_engine": apE,
			"tensor_parallel": rapid.IntRange(1, apE).Draw(t, "tp")}
	}
	if rapid.Bool().Draw(t, "has_contract") {
		doc["engine_contract"] = map[string]any{
			"vllm_version":        rapid.StringMatching(`[0-9.a-z+]{1,12}`).Draw(t, "vllm"),
			"kv_heads":            rapid.IntRange(0, 128).Draw(t, "kvh"),
			"cross_layers_blocks": rapid.SampledFrom([]any{nil, true, false}).Draw(t, "clb"),
			"transfer_mode":       rapid.SampledFrom([]string{"", "pull", "push"}).Draw(t, "mode"),
			"model_architecture":  rapid.String().Draw(t, "arch"),
		}
	}
	return doc
}

// Load(Save(c)) equals c for every valid c.
func TestSaveLoadRoundTripProperty(t *testing.T) {
	dir := t.TempDir()
	rapid.Check(t, func(t *rapid.T) {
		data, err := json.Marshal(genDocument(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := Parse("gen.json", data, noEnv)
		if err != nil {
			t.Fatalf("generated document does not load: %v\n%s", err, data)
		}
		p := filepath.Join(dir, "fleet.json")
		if err := cfg.Save(p); err != nil {
			t.Fatal(err)
		}
		again, err := LoadWith(p, noEnv)
		if err != nil {
			t.Fatalf("saved document does not load: %v", err)
		}
		if diff := cmp.Diff(cfg, again); diff != "" {
			t.Fatalf("round trip (-saved +loaded):\n%s", diff)
		}
	})
}

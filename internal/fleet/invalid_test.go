package fleet

import (
	"errors"
	"strings"
	"testing"
)

// want is one expected problem: its field path ("" for the document) and a
// substring of its reason.
type want struct{ field, reason string }

type invalidCase struct {
	name  string
	raw   string // the whole file, instead of mutating the example
	muts  []mutation
	env   map[string]string
	stage int
	want  []want
}

func m(ms ...mutation) []mutation { return ms }

// invalidCases mirror the reference's invalid-input table: the complete
// example with one change each, and exactly the listed problems.
var invalidCases = []invalidCase{
	{name: "root is an array", raw: `[]`, stage: 2, want: []want{{"", "fleet document must be an object"}}},
	{name: "empty file", raw: ``, stage: 1, want: []want{{"", "invalid JSON"}}},
	{name: "truncated object", raw: `{`, stage: 1, want: []want{{"", "invalid JSON"}}},
	{name: "trailing content", raw: `{} {}`, stage: 1, want: []want{{"", "invalid JSON"}}},
	{name: "invalid utf-8", raw: "{\"model\": \"\xff\"}", stage: 1, want: []want{{"", "invalid JSON"}}},
	{name: "NaN literal", raw: `{"slo": {"ttft_s": NaN}}`, stage: 1, want: []want{{"", "non-finite JSON constant NaN"}}},
	{name: "Infinity literal", raw: `{"slo": {"ttft_s": Infinity}}`, stage: 1, want: []want{{"", "non-finite JSON constant Infinity"}}},
	{name: "-Infinity literal", raw: `{"slo": {"ttft_s": -Infinity}}`, stage: 1, want: []want{{"", "non-finite JSON constant -Infinity"}}},
	{name: "schema missing", muts: m(del("schema")), stage: 2, want: []want{{"schema", "fleet schema is null, expected 'narwhal.fleet'"}}},
	{name: "schema misspelt", muts: m(set("schema", "narwhal.fleets")), stage: 2, want: []want{{"schema", "fleet schema is 'narwhal.fleets', expected 'narwhal.fleet'"}}},
	{name: "schema a number", muts: m(set("schema", "#5")), stage: 2, want: []want{{"schema", "fleet schema is 5, expected"}}},
	{name: "schema_version missing", muts: m(del("schema_version")), stage: 2, want: []want{{"schema_version", "fleet document has no schema_version"}}},
	{name: "schema_version true", muts: m(set("schema_version", true)), stage: 2, want: []want{{"schema_version", "must be a nonnegative integer"}}},
	{name: "schema_version string", muts: m(set("schema_version", "1")), stage: 2, want: []want{{"schema_version", "must be a nonnegative integer"}}},
	{name: "schema_version 1.0", muts: m(set("schema_version", "#1.0")), stage: 2, want: []want{{"schema_version", "must be a nonnegative integer"}}},
	{name: "schema_version -1", muts: m(set("schema_version", "#-1")), stage: 2, want: []want{{"schema_version", "must be a nonnegative integer"}}},
	{name: "schema_version 0", muts: m(set("schema_version", "#0")), stage: 2, want: []want{{"schema_version", "schema_version: fleet schema version 0 is not readable by this build (writes and reads 1)"}}},
	{name: "schema_version 2", muts: m(set("schema_version", "#2")), stage: 2, want: []want{{"schema_version", "schema_version: fleet schema version 2 is newer than this build (writes and reads 1)"}}},
	{name: "unknown key and missing model", muts: m(set("surprise", "#1"), del("model")), stage: 3, want: []want{
		{"surprise", "unknown key 'surprise' (a typo falls back to the default silently)"},
		{"model", "missing required key 'model'"}}},
	{name: "slo missing", muts: m(del("slo")), stage: 3, want: []want{{"slo", "missing required key 'slo'"}}},
	{name: "engines missing", muts: m(del("engines")), stage: 3, want: []want{{"engines", "missing required key 'engines'"}}},
	{name: "model null", muts: m(set("model", nil)), stage: 4, want: []want{{"model", "model must be a string"}}},
	{name: "engines an object", muts: m(set("engines", map[string]any{})), stage: 4, want: []want{{"engines", "engines must be a list"}}},
	{name: "engines null", muts: m(set("engines", nil)), stage: 4, want: []want{{"engines", "engines must be a list"}}},
	{name: "engine entry null", muts: m(set("engines", []any{nil})), stage: 4, want: []want{{"engines[0]", "engines[0] must be an object"}}},
	{name: "engine iid missing", muts: m(del("engines[0].iid")), stage: 4, want: []want{{"engines[0].iid", "engines[0] is missing 'iid'"}}},
	{name: "engine url missing", muts: m(del("engines[1].url")), stage: 4, want: []want{{"engines[1].url", "engines[1] is missing 'url'"}}},
	{name: "engine iid a number", muts: m(set("engines[0].iid", "#1")), stage: 4, want: []want{{"engines[0].iid", "engines[0].iid must be a string"}}},
	{name: "engine url a number", muts: m(set("engines[0].url", "#1")), stage: 4, want: []want{{"engines[0].url", "engines[0].url must be a string"}}},
	{name: "engine attestation_url a bool", muts: m(set("engines[0].attestation_url", false)), stage: 4, want: []want{{"engines[0].attestation_url", "engines[0].attestation_url must be a string"}}},
	{name: "engine pin a number", muts: m(set("engines[0].pin", "#1")), stage: 4, want: []want{{"engines[0].pin", "engines[0].pin must be a boolean"}}},
	{name: "engine role both", muts: m(set("engines[0].role", "both")), stage: 4, want: []want{{"engines[0].role", "engines[0].role must be 'prefill' or 'decode', got 'both'"}}},
	{name: "engine role a number", muts: m(set("engines[0].role", "#1")), stage: 4, want: []want{{"engines[0].role", "engines[0].role must be a string"}}},
	{name: "engine unknown key", muts: m(set("engines[0].weight", "#2")), stage: 4, want: []want{{"engines[0].weight", "unknown engines[0] key 'weight' (a typo falls back to the default silently)"}}},
	{name: "engine shared_device (later schema)", muts: m(set("engines[0].shared_device", map[string]any{"group": "g"})), stage: 4, want: []want{{"engines[0].shared_device", "unknown engines[0] key 'shared_device'"}}},
	{name: "partial url reference", muts: m(set("engines[0].url", "http://${HOST}:8000")), stage: 4, want: []want{{"engines[0].url", "engines[0].url requires a whole-value ${VARIABLE} reference"}}},
	{name: "default-syntax reference", muts: m(set("engines[0].url", "${U:-http://x}")), stage: 4, want: []want{{"engines[0].url", "requires a whole-value ${VARIABLE} reference"}}},
	{name: "empty reference", muts: m(set("engines[0].url", "${}")), stage: 4, want: []want{{"engines[0].url", "requires a whole-value ${VARIABLE} reference"}}},
	{name: "two references", muts: m(set("engines[0].url", "${A}${B}")), stage: 4, want: []want{{"engines[0].url", "requires a whole-value ${VARIABLE} reference"}}},
	{name: "reference name starts with digit", muts: m(set("engines[0].url", "${1X}")), stage: 4, want: []want{{"engines[0].url", "requires a whole-value ${VARIABLE} reference"}}},
	{name: "attestation reference unset", muts: m(set("engines[0].attestation_url", "${UNSET_X}")), stage: 4, want: []want{{"engines[0].attestation_url", "engines[0].attestation_url: environment variable UNSET_X is unset or empty"}}},
	{name: "attestation reference empty", muts: m(set("engines[0].attestation_url", "${UNSET_X}")), env: map[string]string{"UNSET_X": ""}, stage: 4, want: []want{{"engines[0].attestation_url", "environment variable UNSET_X is unset or empty"}}},
	{name: "attestation reference blank", muts: m(set("engines[0].attestation_url", "${UNSET_X}")), env: map[string]string{"UNSET_X": "  "}, stage: 4, want: []want{{"engines[0].attestation_url", "environment variable UNSET_X is unset or empty"}}},
	{name: "reference to a reference", muts: m(set("engines[0].url", "${A}")), env: map[string]string{"A": "${B}", "B": "http://x"}, stage: 4, want: []want{{"engines[0].url", "engines[0].url: environment variable A contains another reference"}}},
	{name: "several engines fail references together", muts: m(set("engines[0].url", "${NOPE_1}"), set("engines[3].attestation_url", "${NOPE_2}")), stage: 4, want: []want{
		{"engines[0].url", "NOPE_1 is unset"}, {"engines[3].attestation_url", "NOPE_2 is unset"}}},
	{name: "slo an array", muts: m(set("slo", []any{})), stage: 4, want: []want{{"slo", "slo must be an object"}}},
	{name: "slo null", muts: m(set("slo", nil)), stage: 4, want: []want{{"slo", "slo must be an object"}}},
	{name: "slo.tpot_s missing", muts: m(del("slo.tpot_s")), stage: 4, want: []want{{"slo.tpot_s", "slo.tpot_s must be a number"}}},
	{name: "slo unknown key", muts: m(set("slo.e2e_s", "#1")), stage: 4, want: []want{{"slo.e2e_s", "unknown slo key 'e2e_s'"}}},
	{name: "controller.thresholds an array", muts: m(set("controller.thresholds", []any{})), stage: 4, want: []want{{"controller.thresholds", "controller.thresholds must be an object"}}},
	{name: "controller a string", muts: m(set("controller", "x")), stage: 4, want: []want{{"controller", "controller must be an object"}}},
	{name: "monitor_interval_s a string", muts: m(set("controller.monitor_interval_s", "1")), stage: 4, want: []want{{"controller.monitor_interval_s", "controller.monitor_interval_s must be a number"}}},
	{name: "monitor_interval_s overflows", muts: m(set("controller.monitor_interval_s", "#1e400")), stage: 4, want: []want{{"controller.monitor_interval_s", "controller.monitor_interval_s must be finite"}}},
	{name: "controller.mode (later schema)", muts: m(set("controller.mode", "planner")), stage: 4, want: []want{{"controller.mode", "unknown controller key 'mode' (a typo falls back to the default silently)"}}},
	{name: "reactive unknown key", muts: m(set("controller.reactive.window", "#1")), stage: 4, want: []want{{"controller.reactive.window", "unknown controller.reactive key 'window'"}}},
	{name: "max_connections true", muts: m(set("serving.max_connections", true)), stage: 4, want: []want{{"serving.max_connections", "serving.max_connections must be an integer"}}},
	{name: "max_connections 512.0", muts: m(set("serving.max_connections", "#512.0")), stage: 4, want: []want{{"serving.max_connections", "must be an integer"}}},
	{name: "max_connections a string", muts: m(set("serving.max_connections", "512")), stage: 4, want: []want{{"serving.max_connections", "must be an integer"}}},
	{name: "max_connections beyond int64", muts: m(set("serving.max_connections", "#99999999999999999999")), stage: 4, want: []want{{"serving.max_connections", "must be an integer"}}},
	{name: "max_connections 1e3", muts: m(set("serving.max_connections", "#1e3")), stage: 4, want: []want{{"serving.max_connections", "must be an integer"}}},
	{name: "tokenize a number", muts: m(set("engine.tokenize", "#1")), stage: 4, want: []want{{"engine.tokenize", "engine.tokenize must be a boolean"}}},
	{name: "three type errors in three sections", muts: m(set("engine.tokenize", "#1"), set("serving.max_connections", "512"), set("controller.monitor_interval_s", true)), stage: 4, want: []want{
		{"controller.monitor_interval_s", "controller.monitor_interval_s must be a number"},
		{"serving.max_connections", "serving.max_connections must be an integer"},
		{"engine.tokenize", "engine.tokenize must be a boolean"}}},
	{name: "engine.backend (later schema)", muts: m(set("engine.backend", "vllm")), stage: 4, want: []want{{"engine.backend", "unknown engine key 'backend'"}}},
	{name: "calibration path a number", muts: m(set("engine.first_token_calibration_path", "#1")), stage: 4, want: []want{{"engine.first_token_calibration_path", "engine.first_token_calibration_path must be a string"}}},
	{name: "profiles.path a number", muts: m(set("profiles.path", "#1")), stage: 4, want: []want{{"profiles.path", "profiles.path must be a string"}}},
	{name: "recovery.health unknown key", muts: m(set("recovery.health.windows", "#1")), stage: 4, want: []want{{"recovery.health.windows", "unknown recovery.health key 'windows'"}}},
	{name: "recovery.resume a string", muts: m(set("recovery.resume", "yes")), stage: 4, want: []want{{"recovery.resume", "recovery.resume must be a boolean"}}},
	{name: "hardware an array", muts: m(set("hardware", []any{})), stage: 4, want: []want{{"hardware", "hardware must be an object"}}},
	{name: "hardware.tensor_parallel missing", muts: m(del("hardware.tensor_parallel")), stage: 4, want: []want{{"hardware.tensor_parallel", "hardware.tensor_parallel must be an integer"}}},
	{name: "hardware.accelerator missing", muts: m(del("hardware.accelerator")), stage: 4, want: []want{{"hardware.accelerator", "hardware.accelerator must be a string"}}},
	{name: "engine_contract an array", muts: m(set("engine_contract", []any{})), stage: 4, want: []want{{"engine_contract", "engine_contract must be an object"}}},
	{name: "contract v2 field name", muts: m(set("engine_contract.engine_version", "0.11.0")), stage: 4, want: []want{{"engine_contract.engine_version", "unknown engine_contract key 'engine_version' (a typo falls back to the default silently)"}}},
	{name: "cross_layers_blocks a string", muts: m(set("engine_contract.cross_layers_blocks", "yes")), stage: 4, want: []want{{"engine_contract.cross_layers_blocks", "engine_contract.cross_layers_blocks must be a boolean or null"}}},
	{name: "enforce_handshake_compat null", muts: m(set("engine_contract.enforce_handshake_compat", nil)), stage: 4, want: []want{{"engine_contract.enforce_handshake_compat", "engine_contract.enforce_handshake_compat must be a boolean"}}},
	{name: "kv_heads 8.0", muts: m(set("engine_contract.kv_heads", "#8.0")), stage: 4, want: []want{{"engine_contract.kv_heads", "engine_contract.kv_heads must be an integer"}}},
	{name: "queue_capacity true", muts: m(set("serving.queue_capacity", true)), stage: 4, want: []want{{"serving.queue_capacity", "serving.queue_capacity must be a nonnegative integer"}}},
	{name: "prefill_concurrency -1", muts: m(set("serving.prefill_concurrency", "#-1")), stage: 4, want: []want{{"serving.prefill_concurrency", "serving.prefill_concurrency must be a nonnegative integer"}}},
	{name: "decode_concurrency 4.0", muts: m(set("serving.decode_concurrency", "#4.0")), stage: 4, want: []want{{"serving.decode_concurrency", "serving.decode_concurrency must be a nonnegative integer"}}},
	{name: "retry_budget null", muts: m(set("serving.retry_budget", nil)), stage: 4, want: []want{{"serving.retry_budget", "serving.retry_budget must be a nonnegative integer"}}},
	{name: "max_attempts 4", muts: m(set("serving.max_attempts", "#4")), stage: 4, want: []want{{"serving.max_attempts", "serving.max_attempts must be an integer between 1 and 3"}}},
	{name: "max_attempts 0", muts: m(set("serving.max_attempts", "#0")), stage: 4, want: []want{{"serving.max_attempts", "between 1 and 3"}}},
	{name: "max_request_bytes 0", muts: m(set("serving.max_request_bytes", "#0")), stage: 4, want: []want{{"serving.max_request_bytes", "serving.max_request_bytes must be a positive integer"}}},
	{name: "max_response_bytes a string", muts: m(set("serving.max_response_bytes", "1")), stage: 4, want: []want{{"serving.max_response_bytes", "serving.max_response_bytes must be a positive integer"}}},
	{name: "handoff_timeout_s a string", muts: m(set("serving.handoff_timeout_s", "5")), stage: 4, want: []want{{"serving.handoff_timeout_s", "serving.handoff_timeout_s must be finite and nonnegative"}}},
	{name: "handoff_timeout_s null", muts: m(set("serving.handoff_timeout_s", nil)), stage: 4, want: []want{{"serving.handoff_timeout_s", "must be finite and nonnegative"}}},
	{name: "handoff_timeout_s -1", muts: m(set("serving.handoff_timeout_s", "#-1")), stage: 4, want: []want{{"serving.handoff_timeout_s", "must be finite and nonnegative"}}},
	{name: "retry_replenish true", muts: m(set("serving.retry_replenish", true)), stage: 4, want: []want{{"serving.retry_replenish", "must be finite and nonnegative"}}},
	{name: "queue without timeout", muts: m(set("serving.queue_timeout_s", "#0")), stage: 4, want: []want{{"serving.queue_capacity", "serving.queue_capacity requires positive queue_timeout_s, prefill_concurrency, and decode_concurrency from workload measurements"}}},
	{name: "queue without prefill_concurrency", muts: m(set("serving.prefill_concurrency", "#0")), stage: 4, want: []want{{"serving.queue_capacity", "requires positive queue_timeout_s"}}},
	{name: "queue without decode_concurrency", muts: m(set("serving.decode_concurrency", "#0")), stage: 4, want: []want{{"serving.queue_capacity", "requires positive queue_timeout_s"}}},
	{name: "queue and retries without handoff", muts: m(set("serving.handoff_timeout_s", "#0")), stage: 4, want: []want{{"serving.handoff_timeout_s", "queued or retried serving requires positive serving.handoff_timeout_s below the verified backend KV lease"}}},
	{name: "retries without handoff", muts: m(set("serving.queue_capacity", "#0"), set("serving.handoff_timeout_s", "#0")), stage: 4, want: []want{{"serving.handoff_timeout_s", "queued or retried serving requires positive"}}},
	{name: "retry cap below base", muts: m(set("serving.retry_cap_s", "#0.05")), stage: 4, want: []want{{"serving.retry_base_s", "serving retry delays require 0 < retry_base_s <= retry_cap_s"}}},
	{name: "retry base zero", muts: m(set("serving.retry_base_s", "#0")), stage: 4, want: []want{{"serving.retry_base_s", "serving retry delays require"}}},
	{name: "retry_replenish above one", muts: m(set("serving.retry_replenish", "#1.5")), stage: 4, want: []want{{"serving.retry_replenish", "serving.retry_replenish must not exceed one credit per completion"}}},
	// [narwhal] deviation: the reference reports only the policy's first failure.
	{name: "policy reports every field's own failure", muts: m(set("serving.queue_capacity", "#-1"), set("serving.max_attempts", "#9")), stage: 4, want: []want{
		{"serving.queue_capacity", "must be a nonnegative integer"}, {"serving.max_attempts", "must be an integer between 1 and 3"}}},
	{name: "serving typo", muts: m(set("serving.handoff_timeout", "#5")), stage: 4, want: []want{{"serving.handoff_timeout", "unknown serving key 'handoff_timeout' (a typo falls back to the default silently)"}}},
	{name: "no engines", muts: m(set("engines", []any{})), stage: 5, want: []want{{"engines", "declares no engines"}}},
	{name: "repeated iid", muts: m(set("engines[1].iid", "p0")), stage: 5, want: []want{{"engines[1].iid", "engines[1].iid repeats an instance id 'p0' (first used by engines[0])"}}},
	{name: "ttft zero", muts: m(set("slo.ttft_s", "#0")), stage: 6, want: []want{{"slo.ttft_s", "slo.ttft_s must be positive, got 0"}}},
	{name: "ttft negative", muts: m(set("slo.ttft_s", "#-1")), stage: 6, want: []want{{"slo.ttft_s", "slo.ttft_s must be positive, got -1"}}},
	{name: "tpot zero", muts: m(set("slo.tpot_s", "#0")), stage: 6, want: []want{{"slo.tpot_s", "slo.tpot_s must be positive, got 0"}}},
	{name: "monitor interval zero", muts: m(set("controller.monitor_interval_s", "#0")), stage: 6, want: []want{{"controller.monitor_interval_s", "controller.monitor_interval_s must be positive, got 0"}}},
	{name: "monitor failure limit zero", muts: m(set("controller.monitor_failure_limit", "#0")), stage: 6, want: []want{{"controller.monitor_failure_limit", "must be at least 1, got 0"}}},
	{name: "min_decode zero", muts: m(set("controller.min_decode", "#0")), stage: 6, want: []want{{"controller.min_decode", "controller.min_decode must be at least 1, got 0"}}},
	{name: "floors leave no decode", muts: m(set("controller.min_prefill", "#4"), set("controller.min_decode", "#1")), stage: 6, want: []want{{"controller.min_prefill", "controller.min_prefill 4 permits zero decode engines in a fleet of 4; at most 3"}}},
	{name: "floors exceed fleet", muts: m(set("controller.min_prefill", "#2"), set("controller.min_decode", "#3")), stage: 6, want: []want{{"controller.min_prefill", "controller.min_prefill 2 plus controller.min_decode 3 exceeds the fleet size 4"}}},
	{name: "flip history zero", muts: m(set("controller.flip_history", "#0")), stage: 6, want: []want{{"controller.flip_history", "must be at least 1, got 0"}}},
	{name: "shrink equals expand", muts: m(set("controller.thresholds.shrink", "#1.0")), stage: 6, want: []want{{"controller.thresholds.shrink", "controller.thresholds.shrink 1 must be below controller.thresholds.expand 1: the band between them is where the pool holds still"}}},
	{name: "cooldown negative", muts: m(set("controller.thresholds.cooldown_s", "#-1")), stage: 6, want: []want{{"controller.thresholds.cooldown_s", "must be nonnegative, got -1"}}},
	{name: "sustained intervals zero", muts: m(set("controller.thresholds.sustained_intervals", "#0")), stage: 6, want: []want{{"controller.thresholds.sustained_intervals", "must be at least 1, got 0"}}},
	{name: "panic ratio half", muts: m(set("controller.thresholds.panic_ratio", "#0.5")), stage: 6, want: []want{{"controller.thresholds.panic_ratio", "controller.thresholds.panic_ratio must be 0 (off) or at least 1, got 0.5"}}},
	{name: "flip resident guard negative", muts: m(set("controller.thresholds.flip_resident_guard", "#-1")), stage: 6, want: []want{{"controller.thresholds.flip_resident_guard", "controller.thresholds.flip_resident_guard must be nonnegative, got -1"}}},
	{name: "utilization above one", muts: m(set("controller.reactive.utilization", "#1.1")), stage: 6, want: []want{{"controller.reactive.utilization", "controller.reactive.utilization is a fraction of an instance, got 1.1"}}},
	{name: "movement margin one", muts: m(set("controller.reactive.movement_margin", "#1.0")), stage: 6, want: []want{
		{"controller.reactive.movement_margin", "controller.reactive.movement_margin must be below 1, got 1"}}},
	{name: "movement margin zero vs fit mape", muts: m(set("controller.reactive.movement_margin", "#0")), stage: 6, want: []want{{"profiles.max_decode_fit_mape", "profiles.max_decode_fit_mape 0.05 exceeds controller.reactive.movement_margin 0"}}},
	{name: "evidence span beyond max span", muts: m(set("controller.reactive.evidence_span_s", "#130")), stage: 6, want: []want{{"controller.reactive.evidence_span_s", "controller.reactive.evidence_span_s 130 exceeds controller.reactive.evidence_max_span_s 120: the minimum evidence duration cannot outlast the bounded lookback"}}},
	{name: "evidence max span beyond window", muts: m(set("controller.reactive.evidence_max_span_s", "#150")), stage: 6, want: []want{{"controller.reactive.evidence_max_span_s", "controller.reactive.evidence_max_span_s 150 exceeds controller.reactive.window_s 120: a demand window shorter than the bounded evidence lookback cannot collect it"}}},
	{name: "decode correction alpha zero", muts: m(set("controller.reactive.decode_correction_alpha", "#0")), stage: 6, want: []want{{"controller.reactive.decode_correction_alpha", "controller.reactive.decode_correction_alpha must be in (0, 1], got 0"}}},
	{name: "decode correction max below min", muts: m(set("controller.reactive.decode_correction_min", "#2"), set("controller.reactive.decode_correction_max", "#1")), stage: 6, want: []want{{"controller.reactive.decode_correction_max", "controller.reactive.decode_correction_max must be at least controller.reactive.decode_correction_min"}}},
	{name: "decode correction min samples zero", muts: m(set("controller.reactive.decode_correction_min_samples", "#0")), stage: 6, want: []want{{"controller.reactive.decode_correction_min_samples", "controller.reactive.decode_correction_min_samples must be at least 1"}}},
	{name: "demand rise tolerance negative", muts: m(set("controller.reactive.demand_rise_tolerance", "#-0.1")), stage: 6, want: []want{{"controller.reactive.demand_rise_tolerance", "controller.reactive.demand_rise_tolerance must be nonnegative, got -0.1"}}},
	{name: "admission strict", muts: m(set("serving.admission", "strict")), stage: 6, want: []want{{"serving.admission", "serving.admission must be 'predictive' or 'open', got 'strict'"}}},
	{name: "admission margin negative", muts: m(set("serving.admission_margin", "#-0.1")), stage: 6, want: []want{{"serving.admission_margin", "must be nonnegative, got -0.1"}}},
	{name: "prefill timeout beyond request", muts: m(set("serving.prefill_timeout_s", "#700")), stage: 6, want: []want{{"serving.prefill_timeout_s", "serving.prefill_timeout_s 700 exceeds serving.request_timeout_s 600: the request expires before this phase limit"}}},
	{name: "first token timeout beyond request", muts: m(set("engine.first_token_timeout_s", "#601")), stage: 6, want: []want{{"engine.first_token_timeout_s", "engine.first_token_timeout_s 601 exceeds serving.request_timeout_s 600: the request expires before this phase limit"}}},
	{name: "graceful fraction", muts: m(set("serving.graceful_timeout_s", "#2.5")), stage: 6, want: []want{{"serving.graceful_timeout_s", "serving.graceful_timeout_s must be whole seconds"}}},
	{name: "graceful negative fraction", muts: m(set("serving.graceful_timeout_s", "#-1.5")), stage: 6, want: []want{
		{"serving.graceful_timeout_s", "serving.graceful_timeout_s must be nonnegative, got -1.5"},
		{"serving.graceful_timeout_s", "serving.graceful_timeout_s must be whole seconds"}}},
	{name: "connector mooncake", muts: m(set("engine.connector", "mooncake")), stage: 6, want: []want{{"engine.connector", "engine.connector: unknown connector 'mooncake': known ones are nixl"}}},
	{name: "dialect openai", muts: m(set("engine.dialect", "openai")), stage: 6, want: []want{{"engine.dialect", "engine.dialect: unknown dialect 'openai': known ones are vllm"}}},
	{name: "chars per token zero", muts: m(set("engine.chars_per_token", "#0")), stage: 6, want: []want{{"engine.chars_per_token", "must be positive, got 0"}}},
	{name: "control connections negative", muts: m(set("engine.control_connections", "#-1")), stage: 6, want: []want{{"engine.control_connections", "engine.control_connections must be nonnegative, got -1"}}},
	{name: "calibration path set (not supported)", muts: m(set("engine.first_token_calibration_path", "runs/calibration/first-token.json")), stage: 6, want: []want{
		{"engine.first_token_calibration_path", "engine.first_token_calibration_path: first-token calibration artifacts are not supported by this build (it cannot verify them); remove the field or set it to \"\""}}},
	{name: "decode read timeout negative", muts: m(set("engine.decode_read_timeout_s", "#-0.5")), stage: 6, want: []want{{"engine.decode_read_timeout_s", "engine.decode_read_timeout_s must be nonnegative, got -0.5"}}},
	{name: "eject_after zero", muts: m(set("recovery.eject_after", "#0")), stage: 6, want: []want{{"recovery.eject_after", "recovery.eject_after must be at least 1, got 0"}}},
	{name: "failure quarantine negative", muts: m(set("recovery.failure_quarantine_s", "#-1")), stage: 6, want: []want{{"recovery.failure_quarantine_s", "recovery.failure_quarantine_s must be nonnegative, got -1"}}},
	{name: "restart policy rolling", muts: m(set("recovery.engine_restart_policy", "rolling")), stage: 6, want: []want{{"recovery.engine_restart_policy", "recovery.engine_restart_policy must be 'individual' or 'whole_wave'"}}},
	{name: "lease backend consul", muts: m(set("recovery.lease", map[string]any{"backend": "consul"})), stage: 6, want: []want{{"recovery.lease.backend", "recovery.lease.backend must be 'file', 'etcd' or 'kubernetes', got 'consul'"}}},
	{name: "lease unknown key", muts: m(set("recovery.lease", map[string]any{"endpoints": "x"})), stage: 4, want: []want{{"recovery.lease.endpoints", "unknown recovery.lease key 'endpoints'"}}},
	{name: "etcd lease without endpoints", muts: m(set("recovery.lease", map[string]any{"backend": "etcd"})), stage: 6, want: []want{{"recovery.lease.etcd_endpoints", "etcd_endpoints is required with backend 'etcd'"}}},
	{name: "etcd lease bad endpoint and key", muts: m(set("recovery.lease", map[string]any{"backend": "etcd", "etcd_endpoints": "http://e0:2379, e1:2379", "etcd_key": "narwhal"})), stage: 6, want: []want{
		{"recovery.lease.etcd_endpoints", `etcd_endpoints entry "e1:2379" is not an http:// URL with a host`},
		{"recovery.lease.etcd_key", `etcd_key "narwhal" must start with '/'`}}},
	{name: "kubernetes lease bad names", muts: m(set("recovery.lease", map[string]any{"backend": "kubernetes", "kubernetes_namespace": "Prod", "kubernetes_name": "router_lease"})), stage: 6, want: []want{
		{"recovery.lease.kubernetes_namespace", `kubernetes_namespace "Prod" is not a Kubernetes namespace`},
		{"recovery.lease.kubernetes_name", `kubernetes_name "router_lease" is not a Kubernetes object name`}}},
	{name: "whole wave without liveness", muts: m(set("recovery.liveness_every", "#0")), stage: 6, want: []want{{"recovery.engine_restart_policy", "recovery.engine_restart_policy whole_wave requires recovery.liveness_every > 0"}}},
	{name: "whole wave with kv_heads undeclared", muts: m(set("engine_contract.kv_heads", "#0")), stage: 6, want: []want{{"recovery.engine_restart_policy", "recovery.engine_restart_policy whole_wave requires a complete engine_contract"}}},
	{name: "whole wave with image digest undeclared", muts: m(set("engine_contract.image_digest", "")), stage: 6, want: []want{{"recovery.engine_restart_policy", "whole_wave requires a complete engine_contract"}}},
	{name: "whole wave with cross_layers_blocks null", muts: m(set("engine_contract.cross_layers_blocks", nil)), stage: 6, want: []want{{"recovery.engine_restart_policy", "whole_wave requires a complete engine_contract"}}},
	{name: "whole wave without contract", muts: m(del("engine_contract")), stage: 6, want: []want{{"recovery.engine_restart_policy", "whole_wave requires a complete engine_contract"}}},
	{name: "health window below one", muts: m(set("recovery.health.window_s", "#0.5")), stage: 6, want: []want{{"recovery.health.window_s", "recovery.health.window_s must be at least 1, got 0.5"}}},
	{name: "drift band one", muts: m(set("recovery.health.drift_band", "#1.0")), stage: 6, want: []want{{"recovery.health.drift_band", "recovery.health.drift_band must exceed 1.0, got 1"}}},
	{name: "min samples beyond cadence", muts: m(set("recovery.health.min_samples", "#40")), stage: 6, want: []want{{"recovery.health.min_samples", "recovery.health.min_samples 40 exceeds the nominal 30 samples per recovery.health.window_s 30 at controller.monitor_interval_s 1"}}},
	{name: "evict before probation", muts: m(set("recovery.health.evict_windows", "#2")), stage: 6, want: []want{{"recovery.health.evict_windows", "recovery.health.evict_windows 2 is below recovery.health.probation_windows 3: ejection is only reachable after probation"}}},
	{name: "probation penalty negative", muts: m(set("recovery.health.probation_penalty_s", "#-1")), stage: 6, want: []want{{"recovery.health.probation_penalty_s", "must be nonnegative, got -1"}}},
	{name: "fit mape beyond margin", muts: m(set("profiles.max_decode_fit_mape", "#0.1")), stage: 6, want: []want{{"profiles.max_decode_fit_mape", "profiles.max_decode_fit_mape 0.1 exceeds controller.reactive.movement_margin 0.05"}}},
	{name: "cv mape zero", muts: m(set("profiles.max_decode_cv_mape", "#0")), stage: 6, want: []want{{"profiles.max_decode_cv_mape", "profiles.max_decode_cv_mape must be positive, got 0"}}},
	{name: "accelerator empty", muts: m(set("hardware.accelerator", "")), stage: 6, want: []want{{"hardware.accelerator", "hardware.accelerator is required"}}},
	{name: "tensor parallel beyond allocation", muts: m(set("hardware.tensor_parallel", "#4")), stage: 6, want: []want{{"hardware.tensor_parallel", "hardware.tensor_parallel cannot exceed hardware.accelerators_per_engine"}}},
	{name: "tensor parallel zero", muts: m(set("hardware.tensor_parallel", "#0")), stage: 6, want: []want{{"hardware.tensor_parallel", "hardware.tensor_parallel must be at least 1"}}},
	{name: "no accelerators", muts: m(set("hardware.accelerators_per_engine", "#0")), stage: 6, want: []want{
		{"hardware.accelerators_per_engine", "hardware.accelerators_per_engine must be at least 1"},
		{"hardware.tensor_parallel", "hardware.tensor_parallel cannot exceed hardware.accelerators_per_engine"}}},
	{name: "empty contract", muts: m(set("engine_contract", map[string]any{}), set("recovery.engine_restart_policy", "individual")), stage: 6, want: []want{{"engine_contract.vllm_version", "engine_contract.vllm_version is required"}}},
	{name: "contract connector empty", muts: m(set("engine_contract.connector", "")), stage: 6, want: []want{{"engine_contract.connector", "engine_contract.connector is required"}}},
	{name: "handshake compat disabled", muts: m(set("engine_contract.enforce_handshake_compat", false)), stage: 6, want: []want{{"engine_contract.enforce_handshake_compat", "engine_contract.enforce_handshake_compat must stay true; disabling vLLM's NIXL compatibility hash permits silent corruption"}}},
	{name: "image digest a tag", muts: m(set("engine_contract.image_digest", "latest")), stage: 6, want: []want{{"engine_contract.image_digest", "engine_contract.image_digest must be an immutable sha256:<64 hex> digest"}}},
	{name: "image digest upper-case hex", muts: m(set("engine_contract.image_digest", "sha256:"+strings.Repeat("A", 64))), stage: 6, want: []want{{"engine_contract.image_digest", "must be an immutable sha256:<64 hex> digest"}}},
	{name: "head size negative", muts: m(set("engine_contract.head_size", "#-1")), stage: 6, want: []want{
		{"engine_contract.head_size", "engine_contract.head_size must be nonnegative"}}},
	{name: "transfer mode both", muts: m(set("engine_contract.transfer_mode", "both")), stage: 6, want: []want{{"engine_contract.transfer_mode", "engine_contract.transfer_mode must be 'pull' or 'push', got 'both'"}}},
}

func TestInvalidDocuments(t *testing.T) {
	if len(invalidCases) < 60 {
		t.Fatalf("only %d invalid cases; the issue asks for at least 60", len(invalidCases))
	}
	for _, tc := range invalidCases {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.raw)
			if tc.muts != nil {
				doc := exampleDoc(t)
				for _, mu := range tc.muts {
					mu(t, doc)
				}
				data = encode(t, doc)
			}
			cfg, err := Parse("fleet.json", data, env(tc.env))
			if err == nil {
				t.Fatalf("loaded without error: %+v", cfg)
			}
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("error %T is not a *LoadError: %v", err, err)
			}
			if le.Stage != tc.stage {
				t.Errorf("stage = %d, want %d (%v)", le.Stage, tc.stage, err)
			}
			if len(le.Problems) != len(tc.want) {
				t.Fatalf("got %d problems, want %d: %v", len(le.Problems), len(tc.want), err)
			}
			for _, w := range tc.want {
				if !hasProblem(le.Problems, w) {
					t.Errorf("no problem with field %q and reason %q in: %v", w.field, w.reason, err)
				}
			}
			if !strings.HasPrefix(err.Error(), "fleet.json") {
				t.Errorf("error %q does not start with the source path", err)
			}
		})
	}
}

func hasProblem(ps []Problem, w want) bool {
	for _, p := range ps {
		if p.Field == w.field && strings.Contains(p.Message, w.reason) {
			return true
		}
	}
	return false
}

// The seed's own example: several type errors in different sections come
// back in one error, in document order.
func TestTypeErrorsInDifferentSectionsComeTogether(t *testing.T) {
	doc := exampleDoc(t)
	set("engine.tokenize", "#1")(t, doc)
	set("serving.max_connections", "#768.0")(t, doc)
	set("controller.monitor_interval_s", true)(t, doc)
	set("engines[2].url", "${UNSET_NODE}")(t, doc)
	_, err := Parse("f.json", encode(t, doc), noEnv)
	want := "f.json: engines[2].url: environment variable UNSET_NODE is unset or empty; " +
		"controller.monitor_interval_s must be a number; serving.max_connections must be an integer; " +
		"engine.tokenize must be a boolean"
	if err == nil || err.Error() != want {
		t.Fatalf("error =\n  %v\nwant\n  %s", err, want)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/no-such-fleet.json")
	var le *LoadError
	if !errors.As(err, &le) || le.Stage != StageParse || le.Err == nil {
		t.Fatalf("err = %#v, want a stage-1 LoadError wrapping the I/O error", err)
	}
	if got := err.Error(); got != "testdata/no-such-fleet.json: no such file or directory" {
		t.Errorf("message = %q", got)
	}
}

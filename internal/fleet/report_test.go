package fleet

import (
	"errors"
	"strings"
	"testing"
)

// staged is one expected problem with the loading stage it belongs to.
type staged struct {
	stage         int
	field, reason string
}

// loadProblems parses data and returns its problems, failing the test when
// it loads or the error is not a *LoadError.
func loadProblems(t *testing.T, data []byte, lookup LookupFunc) *LoadError {
	t.Helper()
	cfg, err := Parse("fleet.json", data, lookup)
	if err == nil {
		t.Fatalf("loaded without error: %d engines", len(cfg.Engines))
	}
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("error %T is not a *LoadError: %v", err, err)
	}
	return le
}

// assertExactly checks that le holds exactly the wanted problems, each with
// its stage, field path and reason.
func assertExactly(t *testing.T, le *LoadError, wants []staged) {
	t.Helper()
	if len(le.Problems) != len(wants) {
		t.Fatalf("got %d problems, want %d: %v", len(le.Problems), len(wants), le)
	}
	for _, w := range wants {
		found := false
		for _, p := range le.Problems {
			if p.Stage == w.stage && p.Field == w.field && strings.Contains(p.Message, w.reason) {
				found = true
			}
		}
		if !found {
			t.Errorf("no stage-%d problem with field %q and reason %q in: %v", w.stage, w.field, w.reason, le)
		}
	}
}

// Independent problems of different stages come back in one error; a
// problem whose check reads a broken field is skipped.
func TestIndependentProblemsTogether(t *testing.T) {
	cases := []struct {
		name  string
		muts  []mutation
		env   map[string]string
		stage int // LoadError.Stage: the earliest stage with a problem
		want  []staged
	}{
		{name: "newer schema_version does not hide an unset reference",
			muts:  m(set("schema_version", "#2"), set("engines[2].url", "${UNSET_NODE}")),
			stage: StageIdentity,
			want: []staged{
				{StageIdentity, "schema_version", "schema_version: fleet schema version 2 is newer than this build (writes and reads 1)"},
				{StageFields, "engines[2].url", "engines[2].url: environment variable UNSET_NODE is unset or empty"}}},
		{name: "wrong schema does not hide a type error",
			muts:  m(set("schema", "narwhal.fleets"), set("engine.tokenize", "#1")),
			stage: StageIdentity,
			want: []staged{
				{StageIdentity, "schema", "fleet schema is 'narwhal.fleets', expected 'narwhal.fleet'"},
				{StageFields, "engine.tokenize", "engine.tokenize must be a boolean"}}},
		{name: "a type error does not hide a range error on another field",
			muts:  m(set("controller.monitor_interval_s", "1"), set("slo.ttft_s", "#0")),
			stage: StageFields,
			want: []staged{
				{StageFields, "controller.monitor_interval_s", "controller.monitor_interval_s must be a number"},
				{StageCross, "slo.ttft_s", "slo.ttft_s must be positive, got 0"}}},
		{name: "unknown top-level key with a range error",
			muts:  m(set("surprise", "#1"), set("recovery.eject_after", "#0")),
			stage: StageTopLevel,
			want: []staged{
				{StageTopLevel, "surprise", "unknown key 'surprise'"},
				{StageCross, "recovery.eject_after", "recovery.eject_after must be at least 1, got 0"}}},
		{name: "repeated iid with a type error and a range error",
			muts:  m(set("engines[3].iid", "p1"), set("engine.tokenize", "#1"), set("serving.max_connections", "#0")),
			stage: StageFields,
			want: []staged{
				{StageFields, "engine.tokenize", "engine.tokenize must be a boolean"},
				{StageEngineIDs, "engines[3].iid", "engines[3].iid repeats an instance id 'p1' (first used by engines[1])"},
				{StageCross, "serving.max_connections", "serving.max_connections must be at least 1, got 0"}}},
		{name: "every repeated iid is reported",
			muts:  m(set("engines[2].iid", "p0"), set("engines[3].iid", "p0")),
			stage: StageEngineIDs,
			want: []staged{
				{StageEngineIDs, "engines[2].iid", "repeats an instance id 'p0'"},
				{StageEngineIDs, "engines[3].iid", "repeats an instance id 'p0'"}}},
		{name: "an iid is compared even when the entry's url is broken",
			muts:  m(set("engines[1].iid", "p0"), set("engines[1].url", "#1")),
			stage: StageFields,
			want: []staged{
				{StageFields, "engines[1].url", "engines[1].url must be a string"},
				{StageEngineIDs, "engines[1].iid", "repeats an instance id 'p0'"}}},
		{name: "a type error on a field hides only its own range check",
			muts:  m(set("slo.ttft_s", "fast")),
			stage: StageFields,
			want:  []staged{{StageFields, "slo.ttft_s", "slo.ttft_s must be a number"}}},
		{name: "a rule reading a broken field is skipped",
			muts:  m(set("controller.thresholds.expand", "x"), set("controller.thresholds.shrink", "#1.5")),
			stage: StageFields,
			want:  []staged{{StageFields, "controller.thresholds.expand", "controller.thresholds.expand must be a number"}}},
		{name: "a broken section hides the rules that read it",
			muts:  m(set("controller", "x"), set("profiles.max_decode_fit_mape", "#0.1")),
			stage: StageFields,
			want:  []staged{{StageFields, "controller", "controller must be an object"}}},
		{name: "a missing slo is not also out of range",
			muts:  m(del("slo"), set("serving.max_connections", "#0")),
			stage: StageTopLevel,
			want: []staged{
				{StageTopLevel, "slo", "missing required key 'slo'"},
				{StageCross, "serving.max_connections", "must be at least 1, got 0"}}},
		{name: "a dropped engine entry hides the floor rule",
			muts:  m(set("engines[1]", nil), set("controller.min_decode", "#3")),
			stage: StageFields,
			want:  []staged{{StageFields, "engines[1]", "engines[1] must be an object"}}},
		{name: "serving policy reports every independent failure",
			muts:  m(set("serving.queue_capacity", "#-1"), set("serving.max_attempts", "#9"), set("serving.retry_replenish", "#1.5")),
			stage: StageFields,
			want: []staged{
				{StageFields, "serving.queue_capacity", "serving.queue_capacity must be a nonnegative integer"},
				{StageFields, "serving.max_attempts", "serving.max_attempts must be an integer between 1 and 3"},
				{StageFields, "serving.retry_replenish", "serving.retry_replenish must not exceed one credit per completion"}}},
		{name: "serving policy skips a relation over a broken field",
			muts:  m(set("serving.handoff_timeout_s", "soon"), set("serving.retry_cap_s", "#0.05")),
			stage: StageFields,
			want: []staged{
				{StageFields, "serving.handoff_timeout_s", "serving.handoff_timeout_s must be finite and nonnegative"},
				{StageFields, "serving.retry_base_s", "serving retry delays require 0 < retry_base_s <= retry_cap_s"}}},
		{name: "no engines is reported with its path",
			muts:  m(set("engines", []any{}), set("slo.tpot_s", "#0")),
			stage: StageEngineIDs,
			want: []staged{
				{StageEngineIDs, "engines", "declares no engines"},
				{StageCross, "slo.tpot_s", "slo.tpot_s must be positive, got 0"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := exampleDoc(t)
			for _, mu := range tc.muts {
				mu(t, doc)
			}
			le := loadProblems(t, encode(t, doc), env(tc.env))
			if le.Stage != tc.stage {
				t.Errorf("LoadError.Stage = %d, want %d", le.Stage, tc.stage)
			}
			assertExactly(t, le, tc.want)
		})
	}
}

// Problems come out grouped by stage, in document order within a stage,
// and every line starts with the source.
func TestProblemOrderAndLines(t *testing.T) {
	doc := exampleDoc(t)
	set("slo.ttft_s", "#0")(t, doc)
	set("engine.tokenize", "#1")(t, doc)
	set("schema_version", "#3")(t, doc)
	set("engines", []any{})(t, doc)
	le := loadProblems(t, encode(t, doc), noEnv)
	want := []string{
		"fleet.json: schema_version: fleet schema version 3 is newer than this build (writes and reads 1)",
		"fleet.json: engine.tokenize must be a boolean",
		"fleet.json declares no engines",
		"fleet.json: slo.ttft_s must be positive, got 0",
	}
	got := le.Lines()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	wantErr := "fleet.json: schema_version: fleet schema version 3 is newer than this build (writes and reads 1); " +
		"engine.tokenize must be a boolean; declares no engines; slo.ttft_s must be positive, got 0"
	if le.Error() != wantErr {
		t.Errorf("Error() =\n  %s\nwant\n  %s", le.Error(), wantErr)
	}
}

// Engine URLs must be http or https with a host, after reference
// resolution; a base URL carries no query or fragment.
func TestURLFields(t *testing.T) {
	const must = " must be an http:// or https:// URL with a host"
	cases := []struct {
		name, key, value string
		env              map[string]string
		reason           string // "" = loads
	}{
		{"schemeless host:port", "url", "10.0.0.12:8000", nil, "url" + must},
		{"schemeless name:port", "url", "node2:8000", nil, "it has no scheme"},
		{"schemeless name", "url", "node2", nil, "it has no scheme"},
		{"ftp", "url", "ftp://10.0.0.12:8000", nil, "its scheme is 'ftp'"},
		{"file", "url", "file:///tmp/engine", nil, "its scheme is 'file'"},
		{"no host", "url", "http://", nil, "it has no host"},
		{"port only", "url", "http://:8000", nil, "it has no host"},
		{"opaque", "url", "http:10.0.0.12", nil, "it has no scheme"},
		{"empty", "url", "", nil, "it is empty"},
		{"space in host", "url", "http://node 2:8000", nil, "it does not parse"},
		{"query on base", "url", "http://10.0.0.12:8000?x=1", nil, "engines[2].url is a base URL and must not carry a query or fragment"},
		{"fragment on base", "url", "http://10.0.0.12:8000#f", nil, "must not carry a query or fragment"},
		{"resolved from the environment", "url", "${NODE}", map[string]string{"NODE": "ftp://10.0.0.12"}, "its scheme is 'ftp'"},
		{"credentials are not echoed", "url", "ftp://user:hunter2@10.0.0.12", nil, "its scheme is 'ftp'"},
		{"attestation schemeless", "attestation_url", "10.0.0.12:8010/v1/attestation", nil, "attestation_url" + must},
		{"attestation ftp", "attestation_url", "ftp://10.0.0.12:8010/v1/attestation", nil, "its scheme is 'ftp'"},
		{"attestation no host", "attestation_url", "https:///v1/attestation", nil, "it has no host"},
		{"https loads", "url", "https://10.0.0.12:8443", nil, ""},
		{"upper-case scheme loads", "url", "HTTP://node2:8000", nil, ""},
		{"ipv6 loads", "url", "http://[fd00::12]:8000/", nil, ""},
		{"path prefix loads", "url", "http://gateway/engines/2/", nil, ""},
		{"user info loads", "url", "http://user:pw@10.0.0.12:8000", nil, ""},
		{"attestation empty loads", "attestation_url", "", nil, ""},
		{"attestation with query loads", "attestation_url", "http://10.0.0.12:8010/v1/attestation?fmt=json", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := exampleDoc(t)
			set("engines[2]."+tc.key, tc.value)(t, doc)
			data := encode(t, doc)
			if tc.reason == "" {
				mustParse(t, data, env(tc.env))
				return
			}
			le := loadProblems(t, data, env(tc.env))
			assertExactly(t, le, []staged{{StageFields, "engines[2]." + tc.key, tc.reason}})
			if !strings.HasPrefix(le.Problems[0].Message, "engines[2]."+tc.key) {
				t.Errorf("message %q does not start with its field path", le.Problems[0].Message)
			}
			if strings.Contains(le.Error(), "hunter2") {
				t.Errorf("message echoes a credential: %v", le)
			}
		})
	}
}

// Duplicate keys anywhere are problems naming the duplicated key's path;
// the rest of the document is still checked.
func TestDuplicateKeys(t *testing.T) {
	cases := []struct {
		name     string
		old, new string // text replacement in the compact encoding of the example
		extra    []staged
		field    string
	}{
		{"top level", `"model":"Qwen/Qwen3-32B"`, `"model":"a","model":"Qwen/Qwen3-32B"`, nil, "model"},
		{"engine entry", `"iid":"d0"`, `"iid":"d0","iid":"d9"`, nil, "engines[2].iid"},
		{"nested section", `"thresholds":{`, `"thresholds":{"expand":2,`, nil, "controller.thresholds.expand"},
		{"spelt with an escape", `"iid":"d1"`, `"iid":"d1","\u0069id":"d1"`, nil, "engines[3].iid"},
		{"inside an annotation", `"_note":"annotations are accepted in every object"`, `"_note":{"a":1,"a":2}`, nil, "engines[3]._note.a"},
		{"three times is one problem", `"model":"Qwen/Qwen3-32B"`, `"model":"a","model":"b","model":"Qwen/Qwen3-32B"`, nil, "model"},
		{"with a range error elsewhere", `"eject_after":3`, `"eject_after":3,"eject_after":0`,
			[]staged{{StageCross, "recovery.eject_after", "recovery.eject_after must be at least 1, got 0"}}, "recovery.eject_after"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text := string(encode(t, exampleDoc(t)))
			if !strings.Contains(text, tc.old) {
				t.Fatalf("example encoding lacks %s", tc.old)
			}
			data := []byte(strings.Replace(text, tc.old, tc.new, 1))
			le := loadProblems(t, data, noEnv)
			want := append([]staged{{StageParse, tc.field, tc.field + " appears more than once in one object"}}, tc.extra...)
			assertExactly(t, le, want)
		})
	}
}

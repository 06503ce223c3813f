package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/cli"
)

// run executes the narwhal CLI in-process.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.Run(newRoot(), args, &out, &errb)
	return code, out.String(), errb.String()
}

const (
	example = "../../examples/fleet.example.json"
	minimal = "../../examples/fleet.minimal.json"
	five    = "testdata/five-mistakes.json"
)

func TestValidateExample(t *testing.T) {
	code, out, errOut := run(t, "config", "validate", "--fleet", example)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	abs, _ := filepath.Abs(example)
	if want := "Validated " + abs + ": 4 engines\n"; out != want {
		t.Errorf("stdout = %q, want %q", out, want)
	}
}

func TestValidateFiveMistakes(t *testing.T) {
	code, out, errOut := run(t, "config", "validate", "--fleet", five)
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if out != "" {
		t.Errorf("stdout = %q, want nothing", out)
	}
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	// Five mistakes of four kinds in five sections: none hides another.
	// Lines come grouped by loading stage, in document order within one.
	wants := []string{
		"serving.max_connections appears more than once in one object; keep one (a reader would silently use the last)",
		"engines[1].url must be an http:// or https:// URL with a host (e.g. http://10.0.0.10:8000): it has no scheme",
		"controller.monitor_interval_s must be a number",
		"recovery.eject_after must be an integer",
		"slo.ttft_s must be positive, got 0",
	}
	if len(lines) != len(wants) {
		t.Fatalf("stderr has %d lines, want %d:\n%s", len(lines), len(wants), errOut)
	}
	for i, w := range wants {
		if lines[i] != five+": "+w {
			t.Errorf("line %d = %q, want %q", i, lines[i], five+": "+w)
		}
	}
}

// A newer schema_version, an unset endpoint variable and a repeated iid
// are reported together, each naming its field.
func TestValidateReportsEveryStage(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fleet.json")
	doc := `{"schema":"narwhal.fleet","schema_version":2,"model":"m","slo":{"ttft_s":1,"tpot_s":0.05},
		"engines":[{"iid":"e0","url":"${NARWHAL_TEST_UNSET_URL}"},{"iid":"e0","url":"ftp://127.0.0.1:2"}]}`
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "config", "validate", "--fleet", p, "--format", "json")
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	e := decodeEnvelope(t, out)
	want := []struct{ field, message string }{
		{"schema_version", p + ": schema_version: fleet schema version 2 is newer than this build (writes and reads 1)"},
		{"engines[0].url", p + ": engines[0].url: environment variable NARWHAL_TEST_UNSET_URL is unset or empty"},
		{"engines[1].url", p + ": engines[1].url must be an http:// or https:// URL with a host (e.g. http://10.0.0.10:8000): its scheme is 'ftp'"},
		{"engines[1].iid", p + ": engines[1].iid repeats an instance id 'e0' (first used by engines[0]); give every engine its own iid"},
	}
	if len(e.Errors) != len(want) {
		t.Fatalf("errors = %+v, want %d\nstderr:\n%s", e.Errors, len(want), errOut)
	}
	for i, w := range want {
		if e.Errors[i].Field != w.field || e.Errors[i].Message != w.message {
			t.Errorf("errors[%d] = %q %q, want %q %q", i, e.Errors[i].Field, e.Errors[i].Message, w.field, w.message)
		}
	}
	if got := strings.Count(errOut, "\n"); got != len(want) {
		t.Errorf("stderr has %d lines, want %d:\n%s", got, len(want), errOut)
	}
}

type envelope struct {
	Schema        string          `json:"schema"`
	SchemaVersion int             `json:"schema_version"`
	Command       string          `json:"command"`
	Operation     string          `json:"operation"`
	Status        string          `json:"status"`
	ExitCode      int             `json:"exit_code"`
	Data          json.RawMessage `json:"data"`
	Artifacts     []any           `json:"artifacts"`
	Errors        []struct {
		Code, Message, Command, Stage, Field string
	} `json:"errors"`
}

func decodeEnvelope(t *testing.T, out string) envelope {
	t.Helper()
	var e envelope
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	if e.Schema != "narwhal.command-result" || e.SchemaVersion != 1 || e.Command != "narwhal" {
		t.Errorf("envelope identity = %+v", e)
	}
	return e
}

func TestConfigJSON(t *testing.T) {
	cases := []struct {
		name      string
		args      []string
		code      int
		status    string
		errCode   string
		errFields []string
	}{
		{"valid", []string{"config", "validate", "--fleet", example, "--format", "json"}, 0, "success", "", nil},
		{"five mistakes", []string{"config", "inspect", "--format=json", "--fleet", five}, 2, "invalid_input", "invalid_input",
			[]string{"serving.max_connections", "engines[1].url", "controller.monitor_interval_s", "recovery.eject_after", "slo.ttft_s"}},
		{"missing file", []string{"config", "validate", "--fleet", "testdata/nope.json", "--format", "json"}, 2, "invalid_input", "input_missing", []string{""}},
		{"a directory", []string{"config", "validate", "--fleet", "testdata", "--format", "json"}, 4, "error", "operation_failed", []string{""}},
		{"no --fleet", []string{"config", "validate", "--format", "json"}, 2, "invalid_input", "invalid_arguments", []string{"--fleet"}},
		{"bad --format value", []string{"config", "validate", "--fleet", example, "--format", "json", "--format", "yaml"}, 2, "invalid_input", "invalid_arguments", []string{"--format"}},
		{"unknown flag", []string{"config", "validate", "--fleet", example, "--format", "json", "--nope"}, 2, "invalid_input", "invalid_arguments", []string{"--nope"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, _ := run(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			e := decodeEnvelope(t, out)
			if e.Status != tc.status || e.ExitCode != tc.code {
				t.Errorf("status %q exit_code %d, want %q %d", e.Status, e.ExitCode, tc.status, tc.code)
			}
			if len(e.Errors) != len(tc.errFields) {
				t.Fatalf("errors = %+v, want %d", e.Errors, len(tc.errFields))
			}
			for i, f := range tc.errFields {
				if e.Errors[i].Code != tc.errCode || e.Errors[i].Field != f {
					t.Errorf("errors[%d] = %+v, want code %q field %q", i, e.Errors[i], tc.errCode, f)
				}
			}
		})
	}
}

func TestInspectMinimal(t *testing.T) {
	code, out, errOut := run(t, "config", "inspect", "--fleet", minimal)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	wd, _ = filepath.EvalSymlinks(wd)
	checks := map[string]any{
		"schema":                                       "narwhal.effective-config",
		"scope":                                        "fleet_file",
		"derived.control_connections":                  4.0,
		"derived.data_keepalive_connections":           256.0,
		"derived.http_retained_limit":                  512.0,
		"derived.uvicorn_graceful_timeout_s":           30.0,
		"settings.engine_contract":                     nil,
		"settings.hardware":                            nil,
		"settings.engine.control_connections":          4.0,
		"settings.serving.max_attempts":                1.0,
		"settings.controller.reactive.step_s":          5.0,
		"settings.recovery.health.relative_band":       1.5,
		"artifact_paths.journal":                       filepath.Join(wd, "runs/journal.jsonl"),
		"artifact_paths.state":                         filepath.Join(wd, "runs/state.json"),
		"settings.profiles.path":                       "runs/profiles.json",
		"settings.schema":                              "narwhal.fleet",
		"settings.engine.first_token_calibration_path": "",
	}
	for path, want := range checks {
		if got := lookup(doc, path); got != want {
			t.Errorf("%s = %#v, want %#v", path, got, want)
		}
	}
	eng := lookup(doc, "settings.engines").([]any)[0].(map[string]any)
	if eng["pin"] != false || eng["attestation_url"] != "" || eng["role"] != "decode" {
		t.Errorf("engine entry = %v, want pin false, attestation_url \"\", role decode", eng)
	}
	if !strings.HasPrefix(out, "{\n  \"artifact_paths\": {") {
		t.Errorf("inspect output is not sorted, indented JSON:\n%.80s", out)
	}
}

func lookup(doc map[string]any, path string) any {
	var cur any = doc
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return "<missing>"
		}
		cur, ok = m[k]
		if !ok {
			return "<missing>"
		}
	}
	return cur
}

func TestInspectRedactsSecrets(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	doc := `{"schema":"narwhal.fleet","schema_version":1,"model":"m","slo":{"ttft_s":1,"tpot_s":1},
		"engine":{"engine_api_key_env":"MY_ENGINE_CRED"},
		"engines":[{"iid":"a","url":"http://user:pw@127.0.0.1:1"},{"iid":"b","url":"${NODE_URL}"}]}`
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MY_ENGINE_CRED", "s3cr3t-value")
	t.Setenv("NODE_URL", "http://127.0.0.1:2/s3cr3t-value")
	for _, format := range []string{"text", "json"} {
		_, out, errOut := run(t, "config", "inspect", "--fleet", p, "--format", format)
		if strings.Contains(out, "s3cr3t-value") || strings.Contains(out, "user:pw") {
			t.Errorf("%s output leaks a secret:\n%s", format, out)
		}
		if !strings.Contains(out, "MY_ENGINE_CRED") {
			t.Errorf("%s output lost the variable name: %s %s", format, out, errOut)
		}
	}
}

func TestVersionFlag(t *testing.T) {
	code, out, _ := run(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "narwhal ") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
	code, out, _ = run(t, "config", "validate", "--version")
	if code != 0 || !strings.HasPrefix(out, "narwhal ") {
		t.Errorf("config validate --version: exit %d, %q", code, out)
	}
}

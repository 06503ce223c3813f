package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit/simkit"
)

// simFleet starts contracted simengines (engine i gets kvHeads[i] KV
// heads when non-zero) and writes an uncontracted fleet for them.
func simFleet(t *testing.T, kvHeads ...int) (fleetPath string, sidecars []*attest.Server) {
	t.Helper()
	var engines []string
	for i, h := range kvHeads {
		id := simengine.DefaultCompat("m")
		if h > 0 {
			id.NumKVHeads = h
		}
		e, err := simengine.Start(simengine.Config{Model: "m", Profile: simengine.DefaultProfile("x"), Compat: id})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		s := simkit.Sidecar(t, e, "127.0.0.1:0")
		sidecars = append(sidecars, s)
		engines = append(engines, fmt.Sprintf(`{"iid":"e%d","url":%q,"attestation_url":%q}`, i, e.URL(), s.AttestationURL()))
	}
	fleetPath = filepath.Join(t.TempDir(), "fleet.json")
	doc := `{"schema":"narwhal.fleet","schema_version":1,"model":"m","engines":[` + strings.Join(engines, ",") + `],"slo":{"ttft_s":1,"tpot_s":0.05}}`
	if err := os.WriteFile(fleetPath, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return fleetPath, sidecars
}

func TestFleetFinalize(t *testing.T) {
	tests := []struct {
		name    string
		kvHeads []int
		code    int
		want    string
	}{
		{"identical contracts", []int{0, 0}, 0, "Router fleet contract verified across live sidecars: "},
		{"differing contracts", []int{0, 4, 0}, 1, "engine sidecars report different contracts: e1 differs from e0 in kv_heads (4 vs 8); relaunch"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, _ := simFleet(t, tc.kvHeads...)
			before, _ := os.ReadFile(path)
			dir := t.TempDir()
			t.Chdir(dir) // the default --out is relative to the working directory
			out := filepath.Join(dir, "deployment", "fleet.json")
			var o, e bytes.Buffer
			code := cli.Run(newRoot(), []string{"fleet", "finalize", "--fleet", path, "--out", out, "--backup-dir", filepath.Join(dir, "runs")}, &o, &e)
			if code != tc.code || !strings.Contains(o.String()+e.String(), tc.want) {
				t.Fatalf("exit %d out %q err %q, want %d with %q", code, o.String(), e.String(), tc.code, tc.want)
			}
			if tc.code != 0 {
				if !strings.Contains(e.String(), "kv_heads (4 vs 8)") {
					t.Fatalf("the differing field is not named: %s", e.String())
				}
				if _, err := os.Stat(out); err == nil {
					t.Fatal("a refused finalisation wrote a fleet")
				}
				return
			}
			cfg, err := fleet.Load(out)
			if err != nil || cfg.EngineContract == nil || !cfg.EngineContract.Complete() || cfg.EngineContract.KVHeads != 8 {
				t.Fatalf("finalised fleet: %v %+v", err, cfg)
			}
			// The source is never modified unless --out names it, so a new
			// --out file needs no backup.
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Fatal("finalising into --out changed the source fleet")
			}
			if b := backups(t, filepath.Join(dir, "runs")); len(b) != 0 {
				t.Fatalf("backups %v of a file nobody replaced", b)
			}
			// Finalising the finalised fleet verifies and writes nothing.
			o.Reset()
			if code := cli.Run(newRoot(), []string{"fleet", "finalize", "--fleet", out, "--backup-dir", filepath.Join(dir, "runs")}, &o, &e); code != 0 || !strings.Contains(o.String(), "nothing written") {
				t.Fatalf("re-finalise: exit %d %q %q", code, o.String(), e.String())
			}
		})
	}
}

// finalizeIn runs `narwhal fleet finalize` with args from dir as the
// working directory.
func finalizeIn(t *testing.T, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Chdir(dir)
	var o, e bytes.Buffer
	code = cli.Run(newRoot(), append([]string{"fleet", "finalize"}, args...), &o, &e)
	return code, o.String(), e.String()
}

func backups(t *testing.T, dir string) []string {
	t.Helper()
	b, _ := filepath.Glob(filepath.Join(dir, "fleet.before-attestation-*.json"))
	return b
}

// Without --out the finalised fleet goes to runs/deployment/fleet.json
// under the working directory, and the source fleet is left as it was.
func TestFinalizeDefaultsToDeploymentFleet(t *testing.T) {
	src, _ := simFleet(t, 0, 0)
	before, _ := os.ReadFile(src)
	dir := t.TempDir()
	code, out, errOut := finalizeIn(t, dir, "--fleet", src)
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	if after, _ := os.ReadFile(src); !bytes.Equal(after, before) {
		t.Fatalf("the source fleet changed:\n%s", after)
	}
	want := filepath.Join("runs", "deployment", "fleet.json")
	cfg, err := fleet.Load(filepath.Join(dir, want))
	if err != nil || cfg.EngineContract == nil || !cfg.EngineContract.Complete() {
		t.Fatalf("finalised fleet at the default path: %v %+v", err, cfg)
	}
	if !strings.Contains(out, "wrote "+want+"; "+src+" left unchanged") {
		t.Errorf("stdout %q does not name the output and the untouched source", out)
	}
	if b := backups(t, filepath.Join(dir, "runs")); len(b) != 0 {
		t.Errorf("nothing was replaced, yet backups %v", b)
	}
}

// A source at the default output path is replaced only when --out names
// it; then the previous file is backed up first.
func TestFinalizeReplacesSourceOnlyWhenNamed(t *testing.T) {
	src, _ := simFleet(t, 0)
	before, _ := os.ReadFile(src)
	dir := t.TempDir()
	deployed := filepath.Join(dir, "runs", "deployment", "fleet.json")
	if err := os.MkdirAll(filepath.Dir(deployed), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(deployed, before, 0o644); err != nil {
		t.Fatal(err)
	}
	rel := filepath.Join("runs", "deployment", "fleet.json")
	code, out, errOut := finalizeIn(t, dir, "--fleet", rel)
	if code != 2 || !strings.Contains(errOut, "--out "+rel) {
		t.Fatalf("implicit in-place finalisation: exit %d, stdout %q, stderr %q; want exit 2 asking for --out", code, out, errOut)
	}
	if after, _ := os.ReadFile(deployed); !bytes.Equal(after, before) {
		t.Fatal("a refused finalisation changed the source")
	}
	code, out, errOut = finalizeIn(t, dir, "--fleet", rel, "--out", "./"+rel)
	if code != 0 {
		t.Fatalf("explicit in-place finalisation: exit %d: %s %s", code, out, errOut)
	}
	if cfg, err := fleet.Load(deployed); err != nil || cfg.EngineContract == nil {
		t.Fatalf("in-place result: %v", err)
	}
	b := backups(t, filepath.Join(dir, "runs"))
	if len(b) != 1 {
		t.Fatalf("backups %v, want one of the replaced file", b)
	}
	if got, _ := os.ReadFile(b[0]); !bytes.Equal(got, before) {
		t.Error("the backup is not the replaced file")
	}
	// Verifying the finalised fleet in place writes nothing, so it needs no --out.
	finalised, _ := os.ReadFile(deployed)
	code, out, errOut = finalizeIn(t, dir, "--fleet", rel)
	if code != 0 || !strings.Contains(out, "nothing written") {
		t.Fatalf("re-verify in place: exit %d %q %q", code, out, errOut)
	}
	if after, _ := os.ReadFile(deployed); !bytes.Equal(after, finalised) {
		t.Error("verification rewrote the fleet")
	}
}

// TestAttestationDigestWithEvidenceCLI: `narwhal evidence digest` of the
// payload without attestation_digest reproduces the sidecar's digest.
func TestAttestationDigestWithEvidenceCLI(t *testing.T) {
	_, sidecars := simFleet(t, 0)
	resp, err := http.Get(sidecars[0].AttestationURL())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var want string
	_ = json.Unmarshal(m["attestation_digest"], &want)
	delete(m, "attestation_digest")
	rest, _ := json.MarshalIndent(m, "", "  ") // not canonical on purpose
	p := filepath.Join(t.TempDir(), "payload.json")
	if err := os.WriteFile(p, rest, 0o600); err != nil {
		t.Fatal(err)
	}
	var o, e bytes.Buffer
	if code := cli.Run(newRoot(), []string{"evidence", "digest", p}, &o, &e); code != 0 || strings.TrimSpace(o.String()) != want {
		t.Fatalf("narwhal evidence digest = %q (exit %d, %s), sidecar says %q", o.String(), code, e.String(), want)
	}
}

package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit/simkit"
)

// fixture starts two contracted simengines and writes their fleet and
// profile store; kvHeads changes engine 1's build, accelerator (when not
// "") the fleet's hardware.accelerator.
func fixture(t *testing.T, kvHeads int, accelerator string) (dir, fleetPath string, closeAll func()) {
	t.Helper()
	dir = t.TempDir()
	st := &profile.Store{Schema: "narwhal.profiles", SchemaVersion: 1}
	var closers []func()
	var engines []string
	for i := 0; i < 2; i++ {
		iid := fmt.Sprintf("e%d", i)
		id := simengine.DefaultCompat("m")
		if i == 1 && kvHeads > 0 {
			id.NumKVHeads = kvHeads
		}
		e, err := simengine.Start(simengine.Config{Model: "m", Profile: simkit.FastRow(iid), Compat: id})
		if err != nil {
			t.Fatal(err)
		}
		s := simkit.Sidecar(t, e, "127.0.0.1:0")
		closers = append(closers, func() { s.Close(); e.Close() })
		st.Profiles = append(st.Profiles, simkit.FastRow(iid))
		engines = append(engines, fmt.Sprintf(`{"iid":%q,"url":%q,"attestation_url":%q}`, iid, e.URL(), s.AttestationURL()))
	}
	if err := profile.Save(filepath.Join(dir, "profiles.json"), st); err != nil {
		t.Fatal(err)
	}
	k, _ := json.Marshal(simengine.Contract(simengine.DefaultCompat("m")))
	doc := fmt.Sprintf(`{"schema":"narwhal.fleet","schema_version":1,"model":"m","engines":[%s],"slo":{"ttft_s":1,"tpot_s":0.05},
"profiles":{"path":%q},"hardware":{"accelerator":%q,"accelerators_per_engine":1,"tensor_parallel":1},"engine_contract":%s}`,
		strings.Join(engines, ","), filepath.Join(dir, "profiles.json"), cmp.Or(accelerator, simengine.DefaultGPUName), k)
	fleetPath = filepath.Join(dir, "fleet.json")
	if err := os.WriteFile(fleetPath, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, fleetPath, func() {
		for _, c := range closers {
			c()
		}
	}
}

func TestPreflightCommand(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	tests := []struct {
		name        string
		kvHeads     int
		accelerator string
		code        int
		status      string
		want        string
	}{
		// Preflight establishes boot_verified (and the engine's own config
		// verdict); only serving evidence from the journal gives
		// serving_verified (reference/evidence.md §4.2, §4.4).
		{"healthy", 0, "", 0, "success", `"state":"boot_verified","states":["boot_verified","engine_config_validated"`},
		{"contract mismatch", 4, "", 1, "failed_gate", `contract.kv_heads is 4, expected 8`},
		// The simulated engines run simengine.DefaultGPUName; the fleet
		// says H200 (issue 32: the field path and both values).
		{"accelerator mismatch", 0, "NVIDIA H200", 1, "failed_gate",
			`e0: hardware.accelerator is \"NVIDIA H200\", the engine host reports \"NVIDIA H100 80GB HBM3\" (GET http://`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, fl, closeAll := fixture(t, tc.kvHeads, tc.accelerator)
			defer closeAll()
			var out, errb bytes.Buffer
			code := cli.Run(newRoot(), []string{"--fleet", fl, "--format", "json", "--pace-words", "100",
				"--evidence-store", filepath.Join(dir, "ev")}, &out, &errb)
			var env map[string]any
			if err := json.Unmarshal(out.Bytes(), &env); err != nil {
				t.Fatalf("stdout is not one JSON envelope: %v\n%s", err, out.String())
			}
			if code != tc.code || env["status"] != tc.status || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("exit %d status %v, want %d %s containing %q\n%s\n%s", code, env["status"], tc.code, tc.status, tc.want, out.String(), errb.String())
			}
			recs, _ := filepath.Glob(filepath.Join(dir, "ev", "records", "*.json"))
			if len(recs) == 0 {
				t.Fatal("no evidence records written")
			}
			// Off a terminal the progress is a plain line per gate on
			// stderr, never on stdout.
			if !strings.Contains(errb.String(), "narwhal-check: gate 1/10: reach (0%)") || strings.Count(errb.String(), "narwhal-check: gate ") != 10 {
				t.Fatalf("progress on stderr:\n%s", errb.String())
			}
		})
	}
}

// --quiet writes no progress.
func TestQuietWritesNoProgress(t *testing.T) {
	dir, fl, closeAll := fixture(t, 0, "")
	defer closeAll()
	var out, errb bytes.Buffer
	if code := cli.Run(newRoot(), []string{"--fleet", fl, "--pace-words", "100", "--quiet", "--evidence-store", filepath.Join(dir, "ev")}, &out, &errb); code != 0 || errb.Len() != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

func TestBadInput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no fleet", []string{}, "--fleet is required"},
		{"missing fleet", []string{"--fleet", "/nonexistent.json"}, "/nonexistent.json"},
		{"bad format", []string{"--fleet", "x", "--format", "yaml"}, "--format must be"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := cli.Run(newRoot(), tc.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d stderr %q, want 2 with %q", code, errb.String(), tc.want)
			}
		})
	}
}

// --startup-log stores the engine's startup-log memory observations on
// the execution preflight bound it to; a flag naming no engine is bad
// input.
func TestStartupLogObservationsAreStored(t *testing.T) {
	dir, fl, closeAll := fixture(t, 0, "")
	defer closeAll()
	log := filepath.Join("..", "..", "internal", "evidence", "memory", "testdata", "vllmlog", "v0_6_6_single.log")
	ev := filepath.Join(dir, "ev")
	var out, errb bytes.Buffer
	if code := cli.Run(newRoot(), []string{"--fleet", fl, "--pace-words", "100", "--quiet", "--evidence-store", ev, "--startup-log", "e0=" + log}, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	rs, err := store.Open(ev).Records()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range rs {
		if r.Record.Claim.Quantity == memory.QuantityObservation && r.Record.Subject[evidence.SubjectEndpoint] != "" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d memory observation records, want the log's one", n)
	}
	if code := cli.Run(newRoot(), []string{"--fleet", fl, "--startup-log", "zz=" + log}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `no engine "zz"`) {
		t.Fatalf("an unknown engine: exit %d %s", code, errb.String())
	}
}

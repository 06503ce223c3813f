package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/kvevents"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

func writeDoc(t *testing.T, e *simengine.Engine, drop string) string {
	t.Helper()
	d, err := attest.Parse("sim", e.AttestationDocument())
	if err != nil {
		t.Fatal(err)
	}
	delete(d.Sources, drop)
	b, _ := json.Marshal(map[string]any{"schema": attest.Schema, "schema_version": 1, "contract": d.Contract, "sources": d.Sources})
	p := filepath.Join(t.TempDir(), "engine-attestation.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExitCodes(t *testing.T) {
	e, err := simengine.Start(simengine.Config{Model: "m", Profile: simengine.DefaultProfile("e0")})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"missing source", []string{"--document", writeDoc(t, e, "kv_heads"), "--engine-base", e.URL(), "--port", "0"}, 2, "populated contract field(s) kv_heads"},
		{"no document flag", []string{"--engine-base", e.URL()}, 2, "--document is required"},
		{"document absent", []string{"--document", "/nonexistent/doc.json", "--engine-base", e.URL()}, 2, "no such file"},
		{"engine unreachable", []string{"--document", writeDoc(t, e, ""), "--engine-base", "http://127.0.0.1:1", "--port", "0"}, 1, "read engine identity"},
		{"bad port", []string{"--document", writeDoc(t, e, ""), "--engine-base", e.URL(), "--port", "70000"}, 2, "--port must be"},
		{"bad accelerator source", []string{"--document", writeDoc(t, e, ""), "--engine-base", e.URL(), "--accelerator-source", "nvml"}, 2,
			"--accelerator-source: accelerator source must be auto, nvidia-smi, engine or none"},
		{"kv events without model", []string{"--document", writeDoc(t, e, ""), "--engine-base", e.URL(), "--kv-events", "tcp://127.0.0.1:5557", "--hash-seed", "0"}, 2, "--model is required"},
		{"kv events without seed", []string{"--document", writeDoc(t, e, ""), "--engine-base", e.URL(), "--kv-events", "tcp://127.0.0.1:5557", "--model", "m", "--hash-seed", ""}, 2, "--hash-seed is required"},
		{"kv events over ipc", []string{"--document", writeDoc(t, e, ""), "--engine-base", e.URL(), "--kv-events", "ipc:///tmp/kv", "--model", "m", "--hash-seed", "0"}, 2, "only the tcp transport"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := cli.Run(newRoot(), tc.args, &out, &errb)
			if code != tc.code || !strings.Contains(errb.String(), tc.stderr) {
				t.Fatalf("exit %d stderr %q, want %d containing %q", code, errb.String(), tc.code, tc.stderr)
			}
			if n := strings.Count(errb.String(), "\n"); n != 1 {
				t.Fatalf("want one stderr line, got %d: %q", n, errb.String())
			}
		})
	}
}

// TestServesUntilCancelled serves until the context ends and names the
// accelerator it observed: nvidia-smi first when it runs (a stand-in
// here), the engine's own device report otherwise.
func TestServesUntilCancelled(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e, err := simengine.Start(simengine.Config{Model: "m", Profile: simengine.DefaultProfile("e0")})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	smi := filepath.Join(t.TempDir(), "nvidia-smi")
	if err := os.WriteFile(smi, []byte("#!/bin/sh\necho 'NVIDIA H200, 143771, 9.0'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		flags []string
		want  string
	}{
		{"nvidia-smi first", []string{"--nvidia-smi", smi}, "accelerator 1 × NVIDIA H200, 140.4 GiB, compute capability 9.0 (nvidia-smi --query-gpu=name,memory.total,compute_cap --format=csv,noheader,nounits)"},
		{"engine when nvidia-smi is absent", []string{"--nvidia-smi", smi + "-absent"}, "accelerator 1 × NVIDIA H100 80GB HBM3, 79.2 GiB, compute capability 9.0 (GET " + e.URL() + "/v1/server/devices)"},
		{"engine only", []string{"--nvidia-smi", smi, "--accelerator-source", "engine"}, "accelerator 1 × NVIDIA H100 80GB HBM3"},
		{"none", []string{"--accelerator-source", "none"}, "accelerator unknown (accelerator observation turned off"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			var got int
			f := &flags{ready: func(s *attest.Server) {
				resp, err := http.Get(s.URL() + "/health")
				if err == nil {
					got = resp.StatusCode
					resp.Body.Close()
				}
				http.DefaultClient.CloseIdleConnections()
				cancel()
			}}
			root := newRootWith(f)
			root.SetContext(ctx)
			var out, errb bytes.Buffer
			args := append([]string{"--document", writeDoc(t, e, ""), "--engine-base", e.URL(), "--port", "0"}, tc.flags...)
			code := cli.Run(root, args, &out, &errb)
			if code != 0 || got != 200 || !strings.Contains(out.String(), "/v1/attestation attests") || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("exit %d health %d out %q err %q, want %q", code, got, out.String(), errb.String(), tc.want)
			}
		})
	}
	e.Close()
}

func TestServesResidencyFromKVEvents(t *testing.T) {
	e, err := simengine.Start(simengine.Config{Model: "m", Profile: simengine.DefaultProfile("e0"),
		Prefix: simengine.PrefixCache{Enabled: true, KVEvents: &kvevents.Config{Enable: true,
			Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	pub, rep := e.KVEventEndpoints()
	ctx, cancel := context.WithCancel(context.Background())
	var known bool
	f := &flags{ready: func(s *attest.Server) {
		defer cancel()
		for range 200 {
			resp, err := http.Get(s.URL() + "/v1/residency")
			if err != nil {
				return
			}
			var snap struct{ Known bool }
			_ = json.NewDecoder(resp.Body).Decode(&snap)
			resp.Body.Close()
			if known = snap.Known; known {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		http.DefaultClient.CloseIdleConnections()
	}}
	root := newRootWith(f)
	root.SetContext(ctx)
	var out, errb bytes.Buffer
	code := cli.Run(root, []string{"--document", writeDoc(t, e, ""), "--engine-base", e.URL(), "--port", "0",
		"--kv-events", pub, "--kv-events-replay", rep, "--model", "m", "--hash-seed", "0"}, &out, &errb)
	if code != 0 || !known {
		t.Fatalf("exit %d residency known %v err %q", code, known, errb.String())
	}
}

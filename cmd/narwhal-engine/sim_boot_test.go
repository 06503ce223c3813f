package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

func TestSimBootFlags(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "vllm.log")
	cases := []struct {
		name    string
		args    []string
		code    int
		stderr  string
		logWant string
	}{
		{"kv too small on an L4", []string{"sim", "--port", "0", "--gpu", "L4", "--model-weights-gib", "14.99", "--max-model-len", "131072", "--startup-log", logPath},
			cli.ExitFailed, "KV cache of 35712 tokens cannot hold one request of max_model_len 131072",
			"ValueError: To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is needed, which is larger than the available KV cache memory (4.36 GiB). Based on the available memory, the estimated maximum model length is 35712."},
		{"bf16 on a T4", []string{"sim", "--port", "0", "--gpu", "T4", "--model-weights-gib", "2.3", "--startup-log", logPath},
			cli.ExitFailed, "pass --dtype half", "Your Tesla T4 GPU has compute capability 7.5."},
		{"tp and heads", []string{"sim", "--port", "0", "--gpu-memory-gib", "80", "--tensor-parallel-size", "3", "--num-attention-heads", "40", "--startup-log", logPath},
			cli.ExitFailed, "40 attention heads", "ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (3)."},
		{"fp8 on a V100", []string{"sim", "--port", "0", "--gpu", "V100-32GB", "--dtype", "half", "--quantization", "fp8", "--startup-log", logPath},
			cli.ExitFailed, "--quantization fp8 needs compute capability 7.5", "ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 75. Current capability: 70."},
		{"unmodelled quantization", []string{"sim", "--gpu", "L4", "--quantization", "awq"}, cli.ExitInvalid, "--quantization", ""},
		{"hardware flag without a gpu", []string{"sim", "--model-weights-gib", "14.99"}, cli.ExitInvalid, "--model-weights-gib needs --gpu or --gpu-memory-gib", ""},
		{"unknown gpu", []string{"sim", "--gpu", "Z80"}, cli.ExitInvalid, "not in the built-in GPU table", ""},
		{"kv capacity and a gpu", []string{"sim", "--gpu", "L4", "--kv-capacity-tokens", "1000"}, cli.ExitInvalid, "drop --kv-capacity-tokens", ""},
		{"fail-startup and a gpu", []string{"sim", "--gpu", "L4", "--fail-startup", "cuda-oom"}, cli.ExitInvalid, "drop --fail-startup", ""},
		{"bad era", []string{"sim", "--gpu", "L4", "--log-era", "v2"}, cli.ExitInvalid, "--log-era", ""},
		{"bad utilization", []string{"sim", "--gpu", "L4", "--gpu-memory-utilization", "1.2"}, cli.ExitInvalid, "--gpu-memory-utilization", ""},
		{"unwritable log", []string{"sim", "--gpu", "L4", "--startup-log", filepath.Join(dir, "no", "such", "dir", "x.log")}, cli.ExitInvalid, "--startup-log", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(logPath)
			var stderr bytes.Buffer
			code := cli.Run(newRoot(), c.args, &bytes.Buffer{}, &stderr)
			if code != c.code || !strings.Contains(stderr.String(), c.stderr) {
				t.Fatalf("exit %d (want %d), stderr %q", code, c.code, stderr.String())
			}
			if c.logWant == "" {
				return
			}
			b, err := os.ReadFile(logPath)
			if err != nil || !strings.Contains(string(b), c.logWant) {
				t.Fatalf("startup log (%v) lacks %q:\n%s", err, c.logWant, b)
			}
		})
	}
}

// The corrected value boots: the command serves and its log shows the
// computed KV cache.
func TestSimBootCorrectedServes(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "vllm.log")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := newRoot()
	root.SetContext(ctx)
	var stdout, stderr testkit.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(root, []string{"sim", "--port", "0", "--side-channel-port", "0", "--admin-port", "0", "--gpu", "L4",
			"--model-weights-gib", "14.99", "--max-model-len", "35712", "--startup-log", logPath}, &stdout, &stderr)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stdout.String(), "http://") {
		select {
		case code := <-done:
			t.Fatalf("exited %d before serving: %s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no URL printed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	b, _ := os.ReadFile(logPath)
	for _, w := range []string{"GPU KV cache size: 35,712 tokens", "Application startup complete."} {
		if !strings.Contains(string(b), w) {
			t.Errorf("log lacks %q:\n%s", w, b)
		}
	}
}

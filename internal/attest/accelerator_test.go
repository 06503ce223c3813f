package attest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
)

const smiSource = "nvidia-smi --query-gpu=name,memory.total,compute_cap --format=csv,noheader,nounits"

func observed(name string, memMiB int64, count int, cc string) attest.Accelerator {
	return attest.Accelerator{Status: attest.AcceleratorObserved, Name: name, MemoryBytes: memMiB << 20, Count: count,
		ComputeCapability: cc, Scope: attest.ScopeHost, Source: smiSource}
}

// checkParsed fails t unless a parse gave want, or an error containing
// wantErr when that is set.
func checkParsed(t *testing.T, got attest.Accelerator, err error, want attest.Accelerator, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want one containing %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("(-want +got)\n%s", d)
	}
}

// The shapes below are nvidia-smi --query-gpu=name,memory.total,compute_cap
// --format=csv,noheader,nounits output: ", " between fields, one GPU per
// line, memory in MiB, "[N/A]" for what the device cannot report.
func TestParseNvidiaSMI(t *testing.T) {
	eight := strings.Repeat("NVIDIA H100 80GB HBM3, 81559, 9.0\n", 8)
	tests := []struct {
		name, out string
		want      attest.Accelerator
		err       string
	}{
		{name: "one GPU", out: "NVIDIA H100 80GB HBM3, 81559, 9.0\n", want: observed("NVIDIA H100 80GB HBM3", 81559, 1, "9.0")},
		{name: "8 GPUs", out: eight, want: observed("NVIDIA H100 80GB HBM3", 81559, 8, "9.0")},
		{name: "CRLF and blank lines", out: "\r\nNVIDIA L4, 23034, 8.9\r\nNVIDIA L4, 23034, 8.9\r\n\r\n", want: observed("NVIDIA L4", 23034, 2, "8.9")},
		{name: "MIG: memory and capability not reported", out: "NVIDIA A100-SXM4-40GB, [N/A], [N/A]\n",
			want: observed("NVIDIA A100-SXM4-40GB", 0, 1, "")},
		{name: "one device unreported, the other's memory kept", out: "NVIDIA A100-SXM4-80GB, [Not Supported], 8.0\nNVIDIA A100-SXM4-80GB, 81920, 8.0\n",
			want: observed("NVIDIA A100-SXM4-80GB", 81920, 2, "8.0")},
		{name: "mixed products listed, smallest memory", out: "NVIDIA H100 80GB HBM3, 81559, 9.0\nNVIDIA A100-SXM4-40GB, 40960, 8.0\n",
			want: observed("NVIDIA H100 80GB HBM3 + NVIDIA A100-SXM4-40GB", 40960, 2, "9.0 + 8.0")},
		{name: "comma in the name", out: "Vendor GPU, rev 2, 1024, 7.5\n", want: observed("Vendor GPU, rev 2", 1024, 1, "7.5")},
		{name: "empty", out: "\n", err: "nvidia-smi listed no GPUs"},
		{name: "no devices", out: "No devices were found\n", err: `line 1 "No devices were found": want 3 comma-separated fields`},
		{name: "old driver without compute_cap", out: "Field \"compute_cap\" is not a valid field to query.\n", err: "want 3 comma-separated fields"},
		{name: "units left in", out: "NVIDIA H100 80GB HBM3, 81559 MiB, 9.0\n", err: `memory.total "81559 MiB" is not a positive number of MiB`},
		{name: "header left in", out: "name, memory.total [MiB], compute_cap\nNVIDIA L4, 23034, 8.9\n", err: "line 1"},
		{name: "capability garbage", out: "NVIDIA L4, 23034, sm_89\n", err: `compute_cap "sm_89" is not major.minor`},
		{name: "no name", out: "[N/A], 23034, 8.9\n", err: "no product name"},
		{name: "zero memory", out: "NVIDIA L4, 0, 8.9\n", err: "not a positive number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := attest.ParseNvidiaSMI([]byte(tc.out))
			checkParsed(t, got, err, tc.want, tc.err)
		})
	}
}

// The bodies are vLLM's DevicesResponse (vllm/entrypoints/serve/devices/
// protocol.py at 3c43c71d78ba86155dc7fae47d1ef5cd69ed5e74).
func TestParseEngineDevices(t *testing.T) {
	h100 := `{"rank":%d,"name":"NVIDIA H100 80GB HBM3","total_memory_bytes":85018877624,"compute_capability":{"major":9,"minor":0},"num_compute_units":132}`
	two := `{"devices":[` + strings.ReplaceAll(h100, "%d", "0") + "," + strings.ReplaceAll(h100, "%d", "1") + `]}`
	tests := []struct {
		name, body string
		want       attest.Accelerator
		err        string
	}{
		{name: "two ranks", body: two, want: attest.Accelerator{Status: attest.AcceleratorObserved, Name: "NVIDIA H100 80GB HBM3",
			MemoryBytes: 85018877624, Count: 2, ComputeCapability: "9.0", Scope: attest.ScopeEngine, Source: "src"}},
		{name: "non-CUDA device, newer member ignored", body: `{"devices":[{"rank":0,"name":"Gaudi2","total_memory_bytes":100,"compute_capability":null,"num_compute_units":8,"uuid":"x"}]}`,
			want: attest.Accelerator{Status: attest.AcceleratorObserved, Name: "Gaudi2", MemoryBytes: 100, Count: 1, Scope: attest.ScopeEngine, Source: "src"}},
		{name: "render-only server", body: `{"devices":[]}`, err: "lists no devices"},
		{name: "not the shape", body: `{"detail":"Not Found"}`, err: "not an object with a devices list"},
		{name: "entry without a name", body: `{"devices":[{"rank":0,"name":"","total_memory_bytes":1}]}`, err: "entry 0 needs rank, name"},
		{name: "garbage", body: `<html>`, err: "not an object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := attest.ParseEngineDevices([]byte(tc.body), "src")
			checkParsed(t, got, err, tc.want, tc.err)
		})
	}
}

func TestCompareAccelerator(t *testing.T) {
	hw := func(acc string, ape, tp int) fleet.Hardware {
		return fleet.Hardware{Accelerator: acc, AcceleratorsPerEngine: ape, TensorParallel: tp}
	}
	host := observed("NVIDIA H100 80GB HBM3", 81559, 8, "9.0")
	engine := host
	engine.Scope, engine.Count = attest.ScopeEngine, 4
	unknown := attest.UnknownAccelerator("none", "off")
	tests := []struct {
		name string
		obs  *attest.Accelerator
		hw   fleet.Hardware
		want []string // fields
	}{
		{name: "agrees", obs: &host, hw: hw("NVIDIA H100 80GB HBM3", 8, 8)},
		{name: "case and spaces", obs: &host, hw: hw(" nvidia h100  80GB hbm3 ", 8, 4)},
		{name: "other product", obs: &host, hw: hw("NVIDIA H200", 8, 8), want: []string{"hardware.accelerator"}},
		{name: "prefix only", obs: &host, hw: hw("NVIDIA H100", 8, 8), want: []string{"hardware.accelerator"}},
		{name: "host sees more than allocated", obs: &host, hw: hw("NVIDIA H100 80GB HBM3", 4, 4), want: []string{"hardware.accelerators_per_engine"}},
		{name: "host sees fewer than TP", obs: &host, hw: hw("NVIDIA H100 80GB HBM3", 16, 16),
			want: []string{"hardware.accelerators_per_engine", "hardware.tensor_parallel"}},
		{name: "engine ranks within the allocation", obs: &engine, hw: hw("NVIDIA H100 80GB HBM3", 8, 4)},
		{name: "engine ranks below TP", obs: &engine, hw: hw("NVIDIA H100 80GB HBM3", 8, 8), want: []string{"hardware.tensor_parallel"}},
		{name: "engine ranks beyond the allocation", obs: &engine, hw: hw("NVIDIA H100 80GB HBM3", 2, 2), want: []string{"hardware.accelerators_per_engine"}},
		{name: "unknown compares nothing", obs: &unknown, hw: hw("NVIDIA H200", 1, 1)},
		{name: "v1 payload compares nothing", obs: nil, hw: hw("NVIDIA H200", 1, 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, m := range attest.CompareAccelerator(tc.obs, tc.hw) {
				got = append(got, m.Field)
				msg := m.Message("e0")
				if !strings.HasPrefix(msg, "e0: "+m.Field+" is "+m.Declared+", the engine host reports "+m.Observed+"; ") || m.Fix == "" {
					t.Fatalf("message %q lacks the field, both values or the fix", msg)
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("mismatched fields (-want +got)\n%s", d)
			}
		})
	}
}

func TestAcceleratorMessageHasBothNames(t *testing.T) {
	host := observed("NVIDIA H100 80GB HBM3", 81559, 1, "9.0")
	m := attest.CompareAccelerator(&host, fleet.Hardware{Accelerator: "NVIDIA H200", AcceleratorsPerEngine: 1, TensorParallel: 1})
	want := `e1: hardware.accelerator is "NVIDIA H200", the engine host reports "NVIDIA H100 80GB HBM3" (` + smiSource +
		`); set hardware.accelerator to "NVIDIA H100 80GB HBM3" or run the engine on NVIDIA H200`
	if len(m) != 1 || m[0].Message("e1") != want {
		t.Fatalf("got %+v\nwant %s", m, want)
	}
}

type fakeDevices struct {
	body []byte
	err  error
}

func (f fakeDevices) ServerDevices(context.Context) ([]byte, error) { return f.body, f.err }

func TestSources(t *testing.T) {
	ctx := context.Background()
	smiOut := func(out string, err error) attest.NvidiaSMI {
		return attest.NvidiaSMI{Path: "nvidia-smi", Run: func(context.Context, string, ...string) ([]byte, error) { return []byte(out), err }}
	}
	dev := `{"devices":[{"rank":0,"name":"NVIDIA L4","total_memory_bytes":1,"compute_capability":{"major":8,"minor":9},"num_compute_units":58}]}`
	tests := []struct {
		name   string
		src    attest.AcceleratorSource
		status string
		text   string // in Name when observed, in Detail when unknown
	}{
		{name: "nvidia-smi first", src: attest.FirstObserved{smiOut("NVIDIA H100 80GB HBM3, 81559, 9.0\n", nil), attest.EngineDevices{Engine: fakeDevices{body: []byte(dev)}}},
			status: attest.AcceleratorObserved, text: "NVIDIA H100 80GB HBM3"},
		{name: "engine when nvidia-smi fails", src: attest.FirstObserved{smiOut("", errors.New("exit status 9: NVIDIA-SMI has failed")), attest.EngineDevices{Engine: fakeDevices{body: []byte(dev)}}},
			status: attest.AcceleratorObserved, text: "NVIDIA L4"},
		{name: "nvidia-smi garbage", src: smiOut("garbage\n", nil), status: attest.AcceleratorUnknown, text: `nvidia-smi line 1 "garbage"`},
		{name: "old vLLM", src: attest.EngineDevices{Engine: fakeDevices{err: &fault.Error{Status: 404, Msg: "404"}}},
			status: attest.AcceleratorUnknown, text: "vLLM without /v1/server/devices"},
		{name: "every reason kept", src: attest.FirstObserved{smiOut("", errors.New("boom")), attest.EngineDevices{Engine: fakeDevices{err: &fault.Error{Status: 401}}}},
			status: attest.AcceleratorUnknown, text: "nvidia-smi failed: boom; the engine's device report needs its API key"},
		{name: "missing executable", src: attest.NvidiaSMI{Path: filepath.Join(t.TempDir(), "nvidia-smi")}, status: attest.AcceleratorUnknown, text: "not found"},
		{name: "none", src: attest.NoAccelerator{}, status: attest.AcceleratorUnknown, text: "turned off"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.src.Accelerator(ctx)
			got := a.Detail
			if a.Known() {
				got = a.Name
			}
			if a.Status != tc.status || !strings.Contains(got, tc.text) {
				t.Fatalf("got %+v, want %s with %q", a, tc.status, tc.text)
			}
		})
	}
}

// TestNvidiaSMIExecutes runs a stand-in nvidia-smi: the query arguments
// reach it, its output is parsed, and one that hangs is cut at the
// timeout instead of holding the sidecar's start-up.
func TestNvidiaSMIExecutes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("shell stand-in")
	}
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	echo := script("smi", `[ "$1 $2" = "--query-gpu=name,memory.total,compute_cap --format=csv,noheader,nounits" ] || { echo "bad args: $*" >&2; exit 2; }
echo "NVIDIA H100 80GB HBM3, 81559, 9.0"`)
	a := attest.NvidiaSMI{Path: echo}.Accelerator(context.Background())
	if !a.Known() || a.Name != "NVIDIA H100 80GB HBM3" || a.Count != 1 {
		t.Fatalf("got %+v", a)
	}
	fail := script("fail", `echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." ; exit 9`)
	if a := (attest.NvidiaSMI{Path: fail}).Accelerator(context.Background()); a.Known() || !strings.Contains(a.Detail, "couldn't communicate with the NVIDIA driver") {
		t.Fatalf("got %+v", a)
	}
	hang := script("hang", "exec sleep 30")
	start := time.Now()
	a = attest.NvidiaSMI{Path: hang, Timeout: 200 * time.Millisecond}.Accelerator(context.Background())
	if a.Known() || !strings.Contains(a.Detail, "no answer within its timeout") || time.Since(start) > 10*time.Second {
		t.Fatalf("got %+v after %v", a, time.Since(start))
	}
}

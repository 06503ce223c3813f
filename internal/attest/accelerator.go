package attest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Accelerator is what the sidecar observed of the engine host's
// accelerators (payload schema_version 2, "accelerator"). It is read once,
// when the sidecar binds to the engine process: a process keeps its
// devices for its whole life.
type Accelerator struct {
	// Status is AcceleratorObserved or AcceleratorUnknown.
	Status string `json:"status"`
	// Name is the product name as NVML reports it ("NVIDIA H100 80GB
	// HBM3"); devices of different products are listed joined by " + ".
	Name string `json:"name"`
	// MemoryBytes is the smallest device's total memory; 0 when no device
	// reported it (MIG, "[N/A]").
	MemoryBytes int64 `json:"memory_bytes"`
	// Count is the number of devices: those visible to the sidecar (Scope
	// "host") or the engine's ranks (Scope "engine").
	Count int `json:"count"`
	// ComputeCapability is "major.minor" ("9.0"); "" when not reported;
	// differing capabilities are joined by " + ".
	ComputeCapability string `json:"compute_capability"`
	// Scope says what Count counts: ScopeHost or ScopeEngine.
	Scope string `json:"count_scope"`
	// Source is what it was read from: the command line or the URL.
	Source string `json:"source"`
	// Detail says why the accelerator is unknown; "" when observed.
	Detail string `json:"detail"`
}

// Accelerator statuses and count scopes.
const (
	AcceleratorObserved = "observed"
	AcceleratorUnknown  = "unknown"
	// ScopeHost: Count is every device the sidecar sees on the engine
	// host (nvidia-smi). Run the sidecar with the replica's allocation
	// (same container or pod) so that this is the allocation.
	ScopeHost = "host"
	// ScopeEngine: Count is the engine's own ranks (vLLM's device report),
	// tensor × pipeline parallel, which may be fewer than allocated.
	ScopeEngine = "engine"
)

// Known reports whether the accelerator was observed.
func (a *Accelerator) Known() bool { return a != nil && a.Status == AcceleratorObserved }

// UnknownAccelerator is the observation when no source could say.
func UnknownAccelerator(source, why string) Accelerator {
	return Accelerator{Status: AcceleratorUnknown, Source: source, Detail: why}
}

// String is the one-line rendering messages use.
func (a *Accelerator) String() string {
	if !a.Known() {
		if a == nil {
			return "unknown (payload schema_version 1 has no accelerator)"
		}
		return "unknown (" + a.Detail + ")"
	}
	s := fmt.Sprintf("%d × %s", a.Count, a.Name)
	if a.MemoryBytes > 0 {
		s += fmt.Sprintf(", %.1f GiB", float64(a.MemoryBytes)/(1<<30))
	}
	if a.ComputeCapability != "" {
		s += ", compute capability " + a.ComputeCapability
	}
	return s + " (" + a.Source + ")"
}

// device is one accelerator as a source listed it.
type device struct {
	name   string
	memory int64  // bytes; 0 when not reported
	cc     string // "major.minor"; "" when not reported
}

// summarize folds a device list into one observation.
func summarize(devs []device, scope, source string) Accelerator {
	a := Accelerator{Status: AcceleratorObserved, Count: len(devs), Scope: scope, Source: source}
	var names, ccs []string
	for _, d := range devs {
		names = appendNew(names, d.name)
		if d.cc != "" {
			ccs = appendNew(ccs, d.cc)
		}
		if d.memory > 0 && (a.MemoryBytes == 0 || d.memory < a.MemoryBytes) {
			a.MemoryBytes = d.memory
		}
	}
	a.Name, a.ComputeCapability = strings.Join(names, " + "), strings.Join(ccs, " + ")
	return a
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// NvidiaSMIArgs is the query the sidecar runs. The field names are
// nvidia-smi's --query-gpu properties (listed by `nvidia-smi
// --help-query-gpu`; the option and --format=csv,noheader,nounits are
// documented in NVIDIA's nvidia-smi manual,
// https://docs.nvidia.com/deploy/nvidia-smi). With nounits, memory.total
// is in MiB. The stored copies of the manual we could cite do not describe
// compute_cap (added to the query list in later drivers); its form
// "major.minor" is what drivers print and what ParseNvidiaSMI accepts. The
// manual warns that nvidia-smi's output is not guaranteed to stay
// backwards compatible, so the parser rejects any line it does not
// recognise rather than guessing.
var NvidiaSMIArgs = []string{"--query-gpu=name,memory.total,compute_cap", "--format=csv,noheader,nounits"}

const mib = int64(1) << 20

// ParseNvidiaSMI reads the output of `nvidia-smi NvidiaSMIArgs...`: one
// line per GPU, "name, memory MiB, major.minor". A field nvidia-smi cannot
// report ("[N/A]", "[Not Supported]", e.g. on MIG-enabled GPUs) is left
// unreported; anything else malformed is an error naming the line.
func ParseNvidiaSMI(out []byte) (Accelerator, error) {
	var devs []device
	for i, line := range strings.Split(strings.ReplaceAll(string(out), "\r\n", "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		d, err := parseSMILine(line)
		if err != nil {
			return Accelerator{}, fmt.Errorf("nvidia-smi line %d %q: %w", i+1, clip(line), err)
		}
		devs = append(devs, d)
	}
	if len(devs) == 0 {
		return Accelerator{}, errors.New("nvidia-smi listed no GPUs")
	}
	return summarize(devs, ScopeHost, "nvidia-smi "+strings.Join(NvidiaSMIArgs, " ")), nil
}

// parseSMILine splits from the right: a product name could hold a comma,
// the two numbers cannot.
func parseSMILine(line string) (device, error) {
	parts := strings.Split(line, ",")
	if len(parts) < 3 {
		return device{}, fmt.Errorf("want 3 comma-separated fields (name, memory.total, compute_cap), got %d", len(parts))
	}
	n := len(parts)
	name := strings.TrimSpace(strings.Join(parts[:n-2], ","))
	memField, ccField := strings.TrimSpace(parts[n-2]), strings.TrimSpace(parts[n-1])
	if name == "" || notReported(name) {
		return device{}, errors.New("no product name")
	}
	d := device{name: name}
	if !notReported(memField) {
		m, err := strconv.ParseInt(memField, 10, 64)
		if err != nil || m <= 0 || m > 1<<30 {
			return device{}, fmt.Errorf("memory.total %q is not a positive number of MiB", memField)
		}
		d.memory = m * mib
	}
	if !notReported(ccField) {
		if !isCapability(ccField) {
			return device{}, fmt.Errorf("compute_cap %q is not major.minor", ccField)
		}
		d.cc = ccField
	}
	return d, nil
}

// notReported is nvidia-smi's bracketed placeholder: [N/A], [Not
// Supported], [Unknown Error], [Insufficient Permissions].
func notReported(s string) bool { return strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") }

func isCapability(s string) bool {
	a, b, ok := strings.Cut(s, ".")
	return ok && digits(a) && digits(b)
}

func digits(s string) bool {
	if s == "" || len(s) > 3 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// engineDevices is vLLM's GET /v1/server/devices answer, one entry per
// rank (vllm-project/vllm vllm/entrypoints/serve/devices/protocol.py at
// 3c43c71d78ba86155dc7fae47d1ef5cd69ed5e74, served by
// vllm/entrypoints/serve/devices/api_router.py at
// 38a7fe0f7d03a32616b9c3341210497f00c03255). Unknown members are
// ignored: a newer vLLM may add some.
type engineDevices struct {
	Devices *[]struct {
		Rank              *int   `json:"rank"`
		Name              string `json:"name"`
		TotalMemoryBytes  int64  `json:"total_memory_bytes"`
		ComputeCapability *struct {
			Major int `json:"major"`
			Minor int `json:"minor"`
		} `json:"compute_capability"`
	} `json:"devices"`
}

// ParseEngineDevices reads vLLM's /v1/server/devices body; source names
// the URL. An empty list (a server without workers) is an error: it says
// nothing about the accelerator.
func ParseEngineDevices(body []byte, source string) (Accelerator, error) {
	var r engineDevices
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&r); err != nil || r.Devices == nil {
		return Accelerator{}, errors.New("/v1/server/devices is not an object with a devices list")
	}
	if len(*r.Devices) == 0 {
		return Accelerator{}, errors.New("/v1/server/devices lists no devices")
	}
	devs := make([]device, 0, len(*r.Devices))
	for i, d := range *r.Devices {
		if d.Rank == nil || strings.TrimSpace(d.Name) == "" || d.TotalMemoryBytes < 0 {
			return Accelerator{}, fmt.Errorf("/v1/server/devices entry %d needs rank, name and total_memory_bytes ≥ 0", i)
		}
		x := device{name: strings.TrimSpace(d.Name), memory: d.TotalMemoryBytes}
		if c := d.ComputeCapability; c != nil && c.Major >= 0 && c.Minor >= 0 {
			x.cc = fmt.Sprintf("%d.%d", c.Major, c.Minor)
		}
		devs = append(devs, x)
	}
	return summarize(devs, ScopeEngine, source), nil
}

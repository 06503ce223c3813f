package simengine

import (
	"fmt"
	"net/http"
)

// GPU is the simulated device an engine reports on GET /v1/server/devices,
// vLLM's own device report (vllm-project/vllm
// vllm/entrypoints/serve/devices/api_router.py at
// 38a7fe0f7d03a32616b9c3341210497f00c03255, protocol.py at
// 3c43c71d78ba86155dc7fae47d1ef5cd69ed5e74): the attestation sidecar reads
// it from there, as it does from a vLLM without nvidia-smi on its host.
type GPU struct {
	Name              string // torch's device name; default DefaultGPUName
	TotalMemoryBytes  int64  // per device; default DefaultGPUMemoryBytes
	ComputeCapability string // "major.minor"; default "9.0"
	Count             int    // ranks listed (one per device the engine uses); default 1
	NumComputeUnits   int    // streaming multiprocessors; default 132 (an H100 SXM)
}

// The default simulated device: an H100 SXM as torch names it, with the
// total memory vLLM logs for it (79.18 GiB; the row "H100-SXM-80GB" of
// internal/evidence/memory's GPU table, which cites the log).
const (
	DefaultGPUName        = "NVIDIA H100 80GB HBM3"
	DefaultGPUMemoryBytes = int64(85018877624)
)

// gpuDefaults fills g: from the simulated boot's device when there is one
// (its name, memory and compute capability; one rank per tensor-parallel
// worker), else the H100 defaults.
func (c *Config) gpuDefaults() {
	g := &c.GPU
	if c.Boot.Enabled() {
		setDefault(&g.Name, c.Boot.GPUName)
		setDefault(&g.TotalMemoryBytes, c.Boot.GPUTotalBytes)
		setDefault(&g.ComputeCapability, c.Boot.ComputeCapability)
		setDefault(&g.Count, c.Boot.TensorParallelSize)
	}
	setDefault(&g.Name, DefaultGPUName)
	setDefault(&g.TotalMemoryBytes, DefaultGPUMemoryBytes)
	setDefault(&g.ComputeCapability, "9.0")
	setDefault(&g.Count, 1)
	setDefault(&g.NumComputeUnits, 132)
}

func (g GPU) validate() error {
	if _, _, ok := parseCC(g.ComputeCapability); !ok || g.Count < 1 || g.TotalMemoryBytes < 0 {
		return fmt.Errorf("simengine: GPU needs a major.minor compute capability, Count ≥ 1 and TotalMemoryBytes ≥ 0, got %q, %d, %d",
			g.ComputeCapability, g.Count, g.TotalMemoryBytes)
	}
	return nil
}

type computeCapability struct {
	Major int `json:"major"`
	Minor int `json:"minor"`
}

type deviceInfo struct {
	Rank              int                `json:"rank"`
	Name              string             `json:"name"`
	TotalMemoryBytes  int64              `json:"total_memory_bytes"`
	ComputeCapability *computeCapability `json:"compute_capability"`
	NumComputeUnits   int                `json:"num_compute_units"`
}

// devices answers GET /v1/server/devices: one entry per rank.
func (e *Engine) devices(w http.ResponseWriter, _ *http.Request) {
	g := e.cfg.GPU
	major, minor, _ := parseCC(g.ComputeCapability)
	out := make([]deviceInfo, g.Count)
	for i := range out {
		out[i] = deviceInfo{Rank: i, Name: g.Name, TotalMemoryBytes: g.TotalMemoryBytes,
			ComputeCapability: &computeCapability{Major: major, Minor: minor}, NumComputeUnits: g.NumComputeUnits}
	}
	writeJSON(w, 200, map[string][]deviceInfo{"devices": out})
}

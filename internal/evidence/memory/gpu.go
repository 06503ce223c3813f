package memory

import (
	_ "embed"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/narwhal-go/narwhal/internal/canon"
)

// GPU is one row of the built-in GPU table (data/gpus.json).
type GPU struct {
	Name    string   `json:"name"`
	Aliases []string `json:"aliases"`
	// DeviceName is the name torch reports, which vLLM's hardware-
	// dependent defaults match against.
	DeviceName       string `json:"device_name"`
	TotalMemoryBytes int64  `json:"total_memory_bytes"`
	// Basis: "vllm_log" (the total vLLM printed at startup) or "nominal"
	// (the vendor's capacity; CUDA reports somewhat less).
	Basis             string `json:"basis"`
	ComputeCapability string `json:"compute_capability"`
	Source            string `json:"source"`
}

// GPU memory bases.
const (
	BasisVLLMLog = "vllm_log"
	BasisNominal = "nominal"
	BasisUser    = "user" // --gpu-memory-gib
)

// GPUTable is data/gpus.json.
type GPUTable struct {
	Schema        string `json:"schema"`
	SchemaVersion int    `json:"schema_version"`
	Note          string `json:"note"`
	GPUs          []GPU  `json:"gpus"`
}

//go:embed data/gpus.json
var gpusJSON []byte

var (
	gpuOnce   sync.Once
	gpuTable  GPUTable
	gpuDigest string
	gpuErr    error
)

func loadGPUTable() (GPUTable, string, error) {
	gpuOnce.Do(func() {
		if gpuErr = decodeVersioned("gpu table", gpusJSON, &gpuTable, "narwhal.memory.gpu_table", 1); gpuErr != nil {
			return
		}
		_, gpuDigest, gpuErr = canon.MarshalDigest(gpuTable)
	})
	return gpuTable, gpuDigest, gpuErr
}

// GPUs returns the built-in table.
func GPUs() []GPU {
	t, _, _ := loadGPUTable()
	return slices.Clone(t.GPUs)
}

// GPUTableDigest is the digest of the built-in GPU table.
func GPUTableDigest() string {
	_, d, _ := loadGPUTable()
	return d
}

// LookupGPU finds a GPU by any name form an engine host prints for it:
// the table name, an alias, or the device name as nvidia-smi and
// torch.cuda.get_device_name print it ("NVIDIA H100 80GB HBM3", "Tesla
// T4", "AMD Instinct MI300X"), vLLM's spelling of it in tuned-config
// file names ("NVIDIA_H100_80GB_HBM3", "AMD_Instinct_MI300X") and the
// Kubernetes GPU feature-discovery label ("NVIDIA-A100-SXM4-80GB"). Case,
// punctuation and the vendor words (NVIDIA, AMD, Tesla, GeForce,
// Instinct) do not count. An unknown name is an error naming the closest
// entries and --gpu-memory-gib.
func LookupGPU(name string) (GPU, error) {
	t, _, err := loadGPUTable()
	if err != nil {
		return GPU{}, err
	}
	want := gpuKey(name)
	if want != "" {
		for _, g := range t.GPUs {
			if slices.Contains(g.keys(), want) {
				return g, nil
			}
		}
	}
	return GPU{}, fmt.Errorf("--gpu %q: not in the built-in GPU table; closest: %s; or give its memory with --gpu-memory-gib", name, strings.Join(closeGPUs(t.GPUs, want), ", "))
}

// keys are the lookup keys of every name the row answers to.
func (g GPU) keys() []string {
	ks := []string{gpuKey(g.Name), gpuKey(g.DeviceName)}
	for _, a := range g.Aliases {
		ks = append(ks, gpuKey(a))
	}
	return ks
}

// gpuVendorWords are dropped from the front of a name's key: engine
// hosts print them inconsistently ("NVIDIA A10" and "A10", "Tesla T4"
// and "T4", "NVIDIA GeForce RTX 4090" and "RTX 4090").
var gpuVendorWords = []string{"nvidia", "amd", "tesla", "geforce", "instinct"}

// gpuKey is a name's lookup key: lower case, letters and digits only,
// leading vendor words dropped.
func gpuKey(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	k := b.String()
	for again := true; again; {
		again = false
		for _, w := range gpuVendorWords {
			if rest, ok := strings.CutPrefix(k, w); ok && rest != "" {
				k, again = rest, true
			}
		}
	}
	return k
}

// HardwareFor turns a table row into the plan's hardware spec.
func HardwareFor(g GPU, count int) HardwareSpec {
	return HardwareSpec{Name: g.Name, DeviceName: g.DeviceName, TotalMemoryBytes: g.TotalMemoryBytes, MemoryBasis: g.Basis, ComputeCapability: g.ComputeCapability, Count: count}
}

// ResolveHardware is the device a command's --gpu NAME and
// --gpu-memory-gib GIB describe, count of them, by one rule for every
// command: a card from the table by name; GIB, when given, replaces its
// memory (basis user); a name the table lacks is accepted only with GIB
// and kept as the operator wrote it; GIB alone is a card named "custom".
// Neither is the zero spec (no device known).
func ResolveHardware(name string, gib float64, count int) (HardwareSpec, error) {
	if gib < 0 || math.IsNaN(gib) || math.IsInf(gib, 0) {
		return HardwareSpec{}, fmt.Errorf("--gpu-memory-gib %v must be a positive number of GiB", gib)
	}
	var hw HardwareSpec
	if name != "" {
		g, err := LookupGPU(name)
		switch {
		case err == nil:
			hw = HardwareFor(g, count)
		case gib == 0:
			return HardwareSpec{}, err
		default:
			hw = HardwareSpec{Name: name, Count: count}
		}
	}
	if gib > 0 {
		if hw.Name == "" {
			hw.Name = "custom"
		}
		hw.TotalMemoryBytes, hw.MemoryBasis, hw.Count = int64(gib*(1<<30)), BasisUser, count
	}
	return hw, nil
}

// closeGPUs ranks table names by edit distance to want (substring matches
// first) and returns the best three.
func closeGPUs(gpus []GPU, want string) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, g := range gpus {
		best := 1 << 30
		for _, n := range g.keys() {
			d := editDistance(want, n)
			if want != "" && (strings.Contains(n, want) || strings.Contains(want, n)) {
				d = 0
			}
			best = min(best, d)
		}
		cs = append(cs, cand{g.Name, best})
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return a.d - b.d })
	var out []string
	for i := 0; i < len(cs) && i < 3; i++ {
		out = append(out, cs[i].name)
	}
	return out
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

package attest

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// HardwareMismatch is one hardware field the observation contradicts.
type HardwareMismatch struct {
	Field    string // public fleet path: hardware.accelerator, hardware.accelerators_per_engine, hardware.tensor_parallel
	Declared string // the fleet's value, rendered
	Observed string // what the engine host reported, rendered
	Fix      string // how to make them agree
}

// Message is the one-line failure for engine iid: what, where, both
// values, how to fix.
func (m HardwareMismatch) Message(iid string) string {
	return fmt.Sprintf("%s: %s is %s, the engine host reports %s; %s", iid, m.Field, m.Declared, m.Observed, m.Fix)
}

// CompareAccelerator compares an observation with the fleet's hardware
// block and lists every contradiction (none: they agree). It is pure, for
// preflight and for the router's readmission gates alike. An unknown
// observation (nil, or Status unknown) contradicts nothing: the caller
// decides what not knowing means (preflight warns).
//
// Rules:
//   - hardware.accelerator equals the observed product name after
//     NormalizeProduct (case and runs of white space ignored). Not a prefix
//     or substring match: "NVIDIA H100" would then pass on an "NVIDIA H100
//     PCIe" as well as on an "NVIDIA H100 80GB HBM3", products with
//     different memory and bandwidth whose profiles differ.
//   - Count scope host (every device the sidecar sees): Count equals
//     hardware.accelerators_per_engine and is at least
//     hardware.tensor_parallel.
//   - Count scope engine (the engine's ranks): hardware.tensor_parallel ≤
//     Count ≤ hardware.accelerators_per_engine, since an engine may use
//     fewer devices than allocated but never more, and runs at least its TP.
func CompareAccelerator(observed *Accelerator, declared fleet.Hardware) []HardwareMismatch {
	if !observed.Known() {
		return nil
	}
	var out []HardwareMismatch
	if NormalizeProduct(observed.Name) != NormalizeProduct(declared.Accelerator) {
		out = append(out, HardwareMismatch{Field: "hardware.accelerator", Declared: strconv.Quote(declared.Accelerator),
			Observed: strconv.Quote(observed.Name) + " (" + observed.Source + ")",
			Fix:      fmt.Sprintf("set hardware.accelerator to %q or run the engine on %s", observed.Name, declared.Accelerator)})
	}
	return append(out, compareCount(observed, declared)...)
}

func compareCount(o *Accelerator, h fleet.Hardware) []HardwareMismatch {
	var out []HardwareMismatch
	seen := fmt.Sprintf("%d device(s) (%s, %s)", o.Count, o.Scope, o.Source)
	apeWrong := o.Count != h.AcceleratorsPerEngine
	if o.Scope == ScopeEngine {
		apeWrong = o.Count > h.AcceleratorsPerEngine
	}
	if apeWrong {
		fix := fmt.Sprintf("set hardware.accelerators_per_engine to %d or give the replica %d device(s)", o.Count, h.AcceleratorsPerEngine)
		if o.Scope == ScopeHost {
			fix += " (run narwhal-attest with the replica's own device allocation: it counts every GPU it sees)"
		}
		out = append(out, HardwareMismatch{Field: "hardware.accelerators_per_engine", Declared: strconv.Itoa(h.AcceleratorsPerEngine), Observed: seen, Fix: fix})
	}
	if o.Count < h.TensorParallel {
		out = append(out, HardwareMismatch{Field: "hardware.tensor_parallel", Declared: strconv.Itoa(h.TensorParallel), Observed: seen,
			Fix: fmt.Sprintf("launch vLLM with --tensor-parallel-size %d on at least that many devices, or set hardware.tensor_parallel to at most %d", h.TensorParallel, o.Count)})
	}
	return out
}

// NormalizeProduct is the product-name form CompareAccelerator matches
// on: lower case, surrounding space trimmed, inner runs of white space
// one space.
func NormalizeProduct(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }

package memory

import (
	"strings"
	"testing"
)

// The name forms engine hosts print resolve to one row each. Device names
// are torch.cuda.get_device_name's, as vLLM spells them in its tuned
// fused-MoE config file names (spaces as underscores) under
// https://github.com/vllm-project/vllm/tree/9d690bb11b7b208a76a83d7ca10bae1acf9465ee/vllm/model_executor/layers/fused_moe/configs
// and in vllm/platforms/rocm.py's _ROCM_DEVICE_ID_NAME_MAP
// (https://github.com/vllm-project/vllm/blob/001eda31e3d032e9dc864e97f3630358b2ff8b5a/vllm/platforms/rocm.py).
func TestLookupGPUNameForms(t *testing.T) {
	for _, tc := range []struct {
		printed, want string
	}{
		{"NVIDIA H100 80GB HBM3", "H100-SXM-80GB"},
		{"NVIDIA_H100_80GB_HBM3", "H100-SXM-80GB"},
		{"NVIDIA-H100-80GB-HBM3", "H100-SXM-80GB"}, // GPU feature discovery label
		{"H100 80GB HBM3", "H100-SXM-80GB"},
		{"nvidia h100", "H100-SXM-80GB"},
		{"NVIDIA H100 PCIe", "H100-PCIe-80GB"},
		{"NVIDIA_H100_NVL", "H100-NVL-94GB"},
		{"NVIDIA H800", "H800-80GB"},
		{"NVIDIA H200", "H200-141GB"},
		{"NVIDIA H20", "H20-96GB"},
		{"NVIDIA_H20-3e", "H20-3e-141GB"},
		{"NVIDIA B200", "B200-180GB"},
		{"NVIDIA A100-SXM4-80GB", "A100-SXM-80GB"},
		{"NVIDIA A100 80GB PCIe", "A100-80GB-PCIe"},
		{"NVIDIA A100-PCIE-40GB", "A100-40GB"},
		{"NVIDIA_A100-PCIe-40GB", "A100-40GB"},
		{"NVIDIA A100-SXM4-40GB", "A100-40GB"},
		{"NVIDIA A10", "A10"},
		{"NVIDIA_A10", "A10"},
		{"A10", "A10"},
		{"NVIDIA A10G", "A10G"},
		{"NVIDIA L4", "L4"},
		{"NVIDIA L40", "L40"},
		{"NVIDIA L40S", "L40S"},
		{"NVIDIA L20", "L20"},
		{"Tesla T4", "T4"},
		{"T4", "T4"},
		{"Tesla V100-SXM2-32GB", "V100-32GB"},
		{"NVIDIA GeForce RTX 3090", "RTX-3090"},
		{"NVIDIA_GeForce_RTX_4090", "RTX-4090"},
		{"RTX 4090", "RTX-4090"},
		{"NVIDIA GeForce RTX 5090", "RTX-5090"},
		{"NVIDIA RTX A6000", "RTX-A6000"},
		{"NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada"},
		{"AMD Instinct MI300X", "MI300X"},
		{"AMD_Instinct_MI300X", "MI300X"},
		{"AMD Instinct MI300X OAM", "MI300X"},
		{"AMD_Instinct_MI325X", "MI325X"},
		{"AMD Instinct MI250X", "MI250X"},
		{"AMD Instinct MI250X / MI250", "MI250X"},
		{"mi250", "MI250X"},
	} {
		g, err := LookupGPU(tc.printed)
		if err != nil {
			t.Errorf("%q: %v", tc.printed, err)
			continue
		}
		if g.Name != tc.want {
			t.Errorf("%q resolved to %s, want %s", tc.printed, g.Name, tc.want)
		}
	}
}

// No name form answers for two rows: a lookup never depends on row order.
func TestGPUKeysAreUnambiguous(t *testing.T) {
	owner := map[string]string{}
	for _, g := range GPUs() {
		for _, k := range g.keys() {
			if k == "" {
				t.Errorf("%s: a name with an empty key", g.Name)
			}
			if o, ok := owner[k]; ok && o != g.Name {
				t.Errorf("key %q answers for both %s and %s", k, o, g.Name)
			}
			owner[k] = g.Name
		}
	}
}

func TestLookupGPUUnknownNamesClosest(t *testing.T) {
	for _, tc := range []struct{ name, closest string }{
		{"NVIDIA H100 SXM 96GB", "H100-SXM-80GB"},
		{"A10X", "A10"},
		{"", ""},
		{"NVIDIA", ""}, // a vendor word alone names no card
	} {
		_, err := LookupGPU(tc.name)
		if err == nil {
			t.Fatalf("%q resolved; want an error", tc.name)
		}
		if !strings.Contains(err.Error(), "--gpu-memory-gib") || !strings.Contains(err.Error(), tc.closest) {
			t.Errorf("%q: %v; want the closest rows (%s) and --gpu-memory-gib", tc.name, err, tc.closest)
		}
	}
}

package simengine

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/narwhal-go/narwhal/internal/testkit"
)

// TestServerDevices: /v1/server/devices lists one entry per rank in
// vLLM's DevicesResponse shape: the H100 default, a configured GPU, or
// the simulated boot's device with one rank per tensor-parallel worker;
// like every /v1 path it needs the API key when one is set.
func TestServerDevices(t *testing.T) {
	type cc struct{ Major, Minor int }
	type dev struct {
		Rank              int    `json:"rank"`
		Name              string `json:"name"`
		TotalMemoryBytes  int64  `json:"total_memory_bytes"`
		ComputeCapability cc     `json:"compute_capability"`
		NumComputeUnits   int    `json:"num_compute_units"`
	}
	h100 := dev{Name: DefaultGPUName, TotalMemoryBytes: DefaultGPUMemoryBytes, ComputeCapability: cc{9, 0}, NumComputeUnits: 132}
	l4 := func(rank int) dev {
		return dev{Rank: rank, Name: "NVIDIA L4", TotalMemoryBytes: l4Bytes, ComputeCapability: cc{8, 9}, NumComputeUnits: 132}
	}
	tests := []struct {
		name string
		mod  func(*Config)
		want []dev
	}{
		{name: "default", want: []dev{h100}},
		{name: "configured", mod: func(c *Config) {
			c.GPU = GPU{Name: "NVIDIA L4", TotalMemoryBytes: l4Bytes, ComputeCapability: "8.9", Count: 2}
		},
			want: []dev{l4(0), l4(1)}},
		{name: "the simulated boot's device", mod: func(c *Config) {
			c.MaxModelLen, c.KVCapacityTokens = 4096, 0
			c.Boot = Boot{GPUName: "NVIDIA L4", GPUTotalBytes: l4Bytes, ComputeCapability: "8.9", WeightsBytes: gibOf(14.99), TensorParallelSize: 2}
		}, want: []dev{l4(0), l4(1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := startEngine(t, tc.mod)
			resp, body := testkit.Get(t, e.URL()+"/v1/server/devices")
			var got struct{ Devices []dev }
			if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != 200 {
				t.Fatalf("%d %s: %v", resp.StatusCode, body, err)
			}
			if d := cmp.Diff(tc.want, got.Devices); d != "" {
				t.Fatalf("(-want +got)\n%s", d)
			}
		})
	}
	e := startEngine(t, func(c *Config) { c.APIKey = "k" })
	if resp, _ := testkit.Get(t, e.URL()+"/v1/server/devices"); resp.StatusCode != 401 {
		t.Fatalf("without the key: %d, want 401", resp.StatusCode)
	}
	if _, err := Start(Config{Model: "m", Profile: fastProfile(), GPU: GPU{ComputeCapability: "nine"}}); err == nil {
		t.Fatal("a GPU without a major.minor capability started")
	}
}

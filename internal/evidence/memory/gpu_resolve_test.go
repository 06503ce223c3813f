package memory

import (
	"strings"
	"testing"
)

// One rule for --gpu and --gpu-memory-gib in every command.
func TestResolveHardware(t *testing.T) {
	l4, err := LookupGPU("l4")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		gpu         string
		gib         float64
		count       int
		wantName    string
		wantBytes   int64
		wantBasis   string
		wantErr     string
		wantUnknown bool // the zero spec: no device named
	}{
		{"table card", "l4", 0, 2, l4.Name, l4.TotalMemoryBytes, l4.Basis, "", false},
		{"table card, memory given", "l4", 20, 1, l4.Name, 20 << 30, BasisUser, "", false},
		{"card the table lacks, memory given", "my-card", 40, 4, "my-card", 40 << 30, BasisUser, "", false},
		{"memory alone", "", 16, 1, "custom", 16 << 30, BasisUser, "", false},
		{"card the table lacks", "my-card", 0, 1, "", 0, "", "gpu-memory-gib", false},
		{"negative memory", "l4", -1, 1, "", 0, "", "positive number of GiB", false},
		{"neither", "", 0, 1, "", 0, "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hw, err := ResolveHardware(tc.gpu, tc.gib, tc.count)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one mentioning %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case tc.wantUnknown:
				if hw != (HardwareSpec{}) {
					t.Fatalf("%+v, want the zero spec", hw)
				}
			case hw.Name != tc.wantName || hw.TotalMemoryBytes != tc.wantBytes || hw.MemoryBasis != tc.wantBasis || hw.Count != tc.count:
				t.Fatalf("%+v, want name %q, %d bytes, basis %q, count %d", hw, tc.wantName, tc.wantBytes, tc.wantBasis, tc.count)
			}
		})
	}
}

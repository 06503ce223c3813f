package memory

import (
	"bytes"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/vllmlog"
)

// gibBytes is the exact byte count of a decimal GiB literal, computed here
// independently of the parser (big.Rat, round half away from zero).
func vlGiB(t *testing.T, s string) int64 {
	t.Helper()
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("bad literal %q", s)
	}
	r.Mul(r, new(big.Rat).SetInt64(1<<30))
	f, _ := r.Float64()
	if f < 0 {
		return -int64(-f + 0.5)
	}
	return int64(f + 0.5)
}

func vlFile(t *testing.T, name string) StartupLog {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "vllmlog", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := ParseVLLMLog(f, VLLMLogOptions{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return l
}

func vlText(t *testing.T, text string, opt VLLMLogOptions) (StartupLog, error) {
	t.Helper()
	return ParseVLLMLog(strings.NewReader(text), opt)
}

func vlWantI64(t *testing.T, what string, got *int64, want int64) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: unknown, want %d", what, want)
		return
	}
	if *got != want {
		t.Errorf("%s: %d, want %d", what, *got, want)
	}
}

func vlWantGiB(t *testing.T, what string, got *int64, lit string) {
	t.Helper()
	vlWantI64(t, what, got, vlGiB(t, lit))
}

func vlWantNil[T any](t *testing.T, what string, got *T) {
	t.Helper()
	if got != nil {
		t.Errorf("%s: %v, want unknown", what, *got)
	}
}

func vlWantF(t *testing.T, what string, got *float64, want float64) {
	t.Helper()
	if got == nil || *got != want {
		t.Errorf("%s: %v, want %v", what, got, want)
	}
}

func vlWantInt(t *testing.T, what string, got *int, want int) {
	t.Helper()
	if got == nil || *got != want {
		t.Errorf("%s: %v, want %d", what, got, want)
	}
}

func vlOnly(t *testing.T, l StartupLog) Observation {
	t.Helper()
	if len(l.Observations) != 1 {
		t.Fatalf("%d observations, want 1", len(l.Observations))
	}
	return l.Observations[0]
}

func TestParseV0Single(t *testing.T) {
	o := vlOnly(t, vlFile(t, "v0_6_6_single.log"))
	// "Loading model weights took 14.9888 GB" is 14.9888 × 2^30 (the source divides by 2**30).
	vlWantGiB(t, "weights", o.ModelWeightBytes, "14.9888")
	if s := o.Sources[FieldModelWeight]; s.Pattern != vllmlog.PatV0LoadingWeights || s.Resolution != float64(1<<30)/1e4 {
		t.Errorf("weights source %+v: want the finer 4-decimal line", s)
	}
	vlWantGiB(t, "total", o.InitialTotalBytes, "79.15")
	vlWantF(t, "util", o.GPUMemoryUtilization, 0.90)
	vlWantGiB(t, "requested", o.RequestedBytes, "71.24")
	vlWantGiB(t, "non-torch", o.NonTorchIncreaseBytes, "0.13")
	vlWantGiB(t, "transient", o.TransientPeakBytes, "1.23")
	vlWantNil(t, "persistent", o.PersistentBytes)
	if o.Sources[FieldTransientPeak].Note != vllmlog.NoteIncludesPersistent {
		t.Errorf("transient note %q: V0 logs only the whole torch peak increase", o.Sources[FieldTransientPeak].Note)
	}
	vlWantGiB(t, "available", o.AvailableKVBytes, "54.89")
	if o.CUDAGraphEstimateApplied == nil || *o.CUDAGraphEstimateApplied {
		t.Errorf("applied %v: V0 never applied a graph estimate", o.CUDAGraphEstimateApplied)
	}
	vlWantNil(t, "estimate", o.CUDAGraphEstimateBytes)
	vlWantGiB(t, "graph actual", o.CUDAGraphActualBytes, "0.53")
	vlWantI64(t, "blocks", o.NumGPUBlocks, 28103)
	vlWantI64(t, "concurrency tokens", o.MaxConcurrencyTokens, 131072)
	vlWantF(t, "concurrency", o.MaxConcurrency, 3.43)
	if o.Sources[FieldNumGPUBlocks].Note != vllmlog.NoteEngineLevel {
		t.Errorf("blocks note %q, want engine_level", o.Sources[FieldNumGPUBlocks].Note)
	}
	vlWantNil(t, "rank", o.Rank) // an unprefixed V0 log does not name its rank
	vlWantNil(t, "kv tokens", o.KVCacheSizeTokens)
}

func TestParseV0ResultsDerivesTorchPeak(t *testing.T) {
	o := vlOnly(t, vlFile(t, "v0_6_4_results.log"))
	vlWantGiB(t, "weights", o.ModelWeightBytes, "14.9595")
	vlWantGiB(t, "torch peak (sum)", o.Sums.TorchPeakBytes, "16.19")
	vlWantI64(t, "transient", o.TransientPeakBytes, vlGiB(t, "16.19")-vlGiB(t, "14.9595"))
	s := o.Sources[FieldTransientPeak]
	if s.Kind != SourceDerived || s.Pattern != vllmlog.PatV0ResultsDerivedPeak || s.Note != vllmlog.NoteIncludesPersistent {
		t.Errorf("transient source %+v", s)
	}
	if want := float64(1<<30)/100 + float64(1<<30)/1e4; s.Resolution != want {
		t.Errorf("derived resolution %v, want the sum %v", s.Resolution, want)
	}
	if o.Sources[FieldNonTorchIncrease].Note != vllmlog.NoteAbsoluteNonTorch {
		t.Errorf("non-torch note %q", o.Sources[FieldNonTorchIncrease].Note)
	}
	vlWantGiB(t, "available", o.AvailableKVBytes, "54.78")
	vlWantF(t, "util", o.GPUMemoryUtilization, 0.9)
	vlWantI64(t, "blocks", o.NumGPUBlocks, 28047)
}

func TestParseV0WorkersSeparate(t *testing.T) {
	l := vlFile(t, "v0_tp2_workers.log")
	if len(l.Observations) != 2 {
		t.Fatalf("%d observations, want the driver and one worker", len(l.Observations))
	}
	driver, worker := l.Observations[0], l.Observations[1]
	vlWantGiB(t, "driver non-torch", driver.NonTorchIncreaseBytes, "0.25")
	vlWantGiB(t, "driver available", driver.AvailableKVBytes, "12.14")
	vlWantGiB(t, "worker non-torch", worker.NonTorchIncreaseBytes, "0.19")
	vlWantGiB(t, "worker available", worker.AvailableKVBytes, "12.76")
	for i, o := range l.Observations {
		vlWantGiB(t, "weights", o.ModelWeightBytes, "7.4946")
		vlWantI64(t, "blocks (engine minimum) of observation "+string(rune('0'+i)), o.NumGPUBlocks, 12431)
	}
}

func TestParseV1TensorParallelDebug(t *testing.T) {
	l := vlFile(t, "v1_tp2_debug.log")
	if len(l.Observations) != 2 {
		t.Fatalf("%d observations, want 2", len(l.Observations))
	}
	for i, want := range []struct{ nonTorch, nonKV, avail string }{{"0.51", "9.64", "61.60"}, {"0.49", "9.62", "61.62"}} {
		o := l.Observations[i]
		vlWantInt(t, "rank", o.Rank, i)
		vlWantGiB(t, "weights", o.ModelWeightBytes, "7.5103")
		vlWantGiB(t, "transient", o.TransientPeakBytes, "1.62")
		vlWantGiB(t, "non-torch", o.NonTorchIncreaseBytes, want.nonTorch)
		vlWantGiB(t, "non-KV (sum)", o.Sums.NonKVCacheBytes, want.nonKV)
		vlWantGiB(t, "available", o.AvailableKVBytes, want.avail)
		vlWantGiB(t, "requested", o.RequestedBytes, "71.24")
		vlWantGiB(t, "free", o.InitialFreeBytes, "78.62")
		vlWantI64(t, "kv tokens", o.KVCacheSizeTokens, 1009248)
		vlWantI64(t, "concurrency tokens", o.MaxConcurrencyTokens, 131072)
		vlWantF(t, "concurrency", o.MaxConcurrency, 7.70)
		if k := o.Sources[FieldTransientPeak].Kind; k != SourceDebugLog {
			t.Errorf("transient kind %q, want debug_log", k)
		}
		if k := o.Sources[FieldAvailableKV].Kind; k != SourceLogLine {
			t.Errorf("available kind %q, want log_line", k)
		}
	}
}

func TestParseV1EstimateApplied(t *testing.T) {
	o := vlOnly(t, vlFile(t, "v1_estimate.log"))
	vlWantInt(t, "rank", o.Rank, 0)
	vlWantInt(t, "dp", o.DPRank, 0)
	vlWantInt(t, "tp", o.TPRank, 0)
	if o.CUDAGraphEstimateApplied == nil || !*o.CUDAGraphEstimateApplied {
		t.Fatalf("applied %v, want true", o.CUDAGraphEstimateApplied)
	}
	vlWantGiB(t, "estimate", o.CUDAGraphEstimateBytes, "0.61")
	vlWantGiB(t, "actual", o.CUDAGraphActualBytes, "0.58")
	vlWantGiB(t, "pool estimate (sum)", o.Sums.CUDAGraphPoolEstimateBytes, "0.61")
	vlWantGiB(t, "total", o.InitialTotalBytes, "79.18")
	vlWantGiB(t, "free", o.InitialFreeBytes, "78.57")
	vlWantGiB(t, "requested", o.RequestedBytes, "71.26")
	vlWantF(t, "util", o.GPUMemoryUtilization, 0.9)
	if r := o.Sources[FieldUtilization].Resolution; r != 1e-6 {
		t.Errorf("util resolution %v: the %%f line (0.900000) is the finest", r)
	}
	vlWantI64(t, "suggested (requested)", o.Sums.SuggestedKVCacheRequestedBytes, 57266426347)
	vlWantI64(t, "suggested (device)", o.Sums.SuggestedKVCacheDeviceBytes, 65115479080)
	vlWantGiB(t, "available", o.AvailableKVBytes, "53.48")
	vlWantI64(t, "kv tokens", o.KVCacheSizeTokens, 438096)
}

// TestKVCacheMemoryBytesSkipsProfile: with --kv-cache-memory the profile
// fields are unknown and the budget is the configured value
// (reference/evidence.md §2.10.5).
func TestKVCacheMemoryBytesSkipsProfile(t *testing.T) {
	o := vlOnly(t, vlFile(t, "v1_kv_cache_memory.log"))
	vlWantGiB(t, "available", o.AvailableKVBytes, "40.0")
	if n := o.Sources[FieldAvailableKV].Note; n != vllmlog.NoteConfigured {
		t.Errorf("available note %q, want configured", n)
	}
	vlWantNil(t, "transient", o.TransientPeakBytes)
	vlWantNil(t, "persistent", o.PersistentBytes)
	vlWantNil(t, "non-torch", o.NonTorchIncreaseBytes)
	vlWantNil(t, "requested", o.RequestedBytes)
	vlWantNil(t, "estimate", o.CUDAGraphEstimateBytes)
	vlWantGiB(t, "free", o.InitialFreeBytes, "78.57")
	vlWantI64(t, "kv tokens", o.KVCacheSizeTokens, 327680)
}

func TestParseWorkerNames(t *testing.T) {
	l := vlFile(t, "v1_tp4_workers.log")
	if len(l.Observations) != 4 {
		t.Fatalf("%d observations, want 4", len(l.Observations))
	}
	for i, avail := range []string{"34.74", "34.71", "34.73", "34.72"} {
		o := l.Observations[i]
		vlWantInt(t, "rank", o.Rank, i) // Worker_TP<i>, no PP/DP group: rank i
		vlWantInt(t, "tp", o.TPRank, i)
		vlWantInt(t, "pp", o.PPRank, 0)
		vlWantGiB(t, "available", o.AvailableKVBytes, avail)
		vlWantI64(t, "kv tokens", o.KVCacheSizeTokens, 454944)
		vlWantGiB(t, "estimate", o.CUDAGraphEstimateBytes, "0.35")
	}
	l = vlFile(t, "v1_pp2_tp2.log")
	if len(l.Observations) != 4 {
		t.Fatalf("pp2×tp2: %d observations, want 4", len(l.Observations))
	}
	o := l.Observations
	vlWantInt(t, "rank of pid 501", o[0].Rank, 0)
	vlWantInt(t, "rank of pid 502", o[1].Rank, 1)
	vlWantInt(t, "rank of pid 503", o[2].Rank, 2)
	vlWantInt(t, "pp of pid 503", o[2].PPRank, 1)
	// pid 504 printed no assignment line and its name has a PP group, so
	// its rank is not stated anywhere: unknown, never computed from a guess.
	vlWantNil(t, "rank of pid 504", o[3].Rank)
	vlWantInt(t, "pp of pid 504", o[3].PPRank, 1)
	vlWantInt(t, "tp of pid 504", o[3].TPRank, 1)
	vlWantGiB(t, "weights of pid 504", o[3].ModelWeightBytes, "16.06")
}

// TestObservationsNonOverlapping: the raw parts reproduce vLLM's non-KV
// total within resolution, and no raw field is read from a vLLM sum
// (reference/evidence.md §2.10.5).
func TestObservationsNonOverlapping(t *testing.T) {
	sumPatterns := map[PatternID]bool{vllmlog.PatV1NonKVTotal: true, vllmlog.PatV0ResultsPeakTorch: true, vllmlog.PatV1UsageConsumed: true, vllmlog.PatV1UsageCUDAGraph: true}
	for _, name := range []string{"v1_tp2_debug.log", "v1_estimate.log"} {
		for _, o := range vlFile(t, name).Observations {
			parts, res, ok := o.nonKVParts()
			if !ok || o.Sums.NonKVCacheBytes == nil {
				t.Fatalf("%s: parts known %v, sum %v", name, ok, o.Sums.NonKVCacheBytes)
			}
			if d := float64(obsAbs(parts - *o.Sums.NonKVCacheBytes)); d > res+o.res(SumNonKVCache) {
				t.Errorf("%s: parts %d vs sum %d differ by %v > resolution %v", name, parts, *o.Sums.NonKVCacheBytes, d, res)
			}
			for field, src := range o.Sources {
				if !strings.HasPrefix(field, "vllm_sums.") && sumPatterns[src.Pattern] {
					t.Errorf("%s: raw field %s read from the sum pattern %s", name, field, src.Pattern)
				}
			}
		}
	}
}

// TestPeakActivationNotNormalized: vLLM's "peak activation" is kept as a
// sum wherever a graph estimate may be inside it; only a log with no graph
// estimate lets it stand for the torch peak increase.
func TestPeakActivationNotNormalized(t *testing.T) {
	o := vlOnly(t, vlFile(t, "v1_estimate.log"))
	if p := o.Sources[FieldTransientPeak].Pattern; p != vllmlog.PatV1TorchPeakIncrease {
		t.Errorf("transient from %s, want the torch peak increase line", p)
	}
	vlWantGiB(t, "peak activation (sum)", o.Sums.PeakActivationBytes, "2.01")

	usage := "(EngineCore_DP0 pid=9) INFO 05-30 07:46:21 [gpu_model_runner.py:6365] Estimated CUDA graph memory: 0.61 GiB total\n" +
		"(EngineCore_DP0 pid=9) INFO 05-30 07:46:25 [gpu_worker.py:655] Free memory on device (78.57/79.18 GiB) on startup. Desired GPU memory utilization is (0.9, 71.26 GiB). Actual usage is 14.99 GiB for weight, 2.62 GiB for peak activation, 0.17 GiB for non-torch memory, and 0.61 GiB for CUDAGraph memory.\n"
	l, err := vlText(t, usage, VLLMLogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o = vlOnly(t, l)
	vlWantNil(t, "transient with an estimate in the log", o.TransientPeakBytes)
	vlWantGiB(t, "peak activation (sum)", o.Sums.PeakActivationBytes, "2.62")

	noEstimate := strings.SplitN(usage, "\n", 2)[1]
	l, err = vlText(t, noEstimate, VLLMLogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o = vlOnly(t, l)
	vlWantGiB(t, "transient without any estimate", o.TransientPeakBytes, "2.62")
	vlWantNil(t, "peak activation (moved)", o.Sums.PeakActivationBytes)
	vlWantGiB(t, "graph sizing (sum)", o.Sums.CUDAGraphSizingBytes, "0.61")
	vlWantNil(t, "graph actual", o.CUDAGraphActualBytes)
}

// TestGraphEstimateNotDoubleCounted: the torch peak excludes the estimate,
// the budget identity subtracts it once, and an observation that counts it
// inside the peak as well fails validation.
func TestGraphEstimateNotDoubleCounted(t *testing.T) {
	o := vlOnly(t, vlFile(t, "v1_estimate.log"))
	vlWantGiB(t, "transient", o.TransientPeakBytes, "2.01")
	if err := o.Validate(nil); err != nil {
		t.Fatal(err)
	}
	bad := o
	v := *o.TransientPeakBytes + *o.CUDAGraphEstimateBytes
	bad.TransientPeakBytes = &v
	err := bad.Validate(nil)
	if err == nil || !strings.Contains(err.Error(), FieldAvailableKV) || !strings.Contains(err.Error(), SumNonKVCache) {
		t.Fatalf("estimate counted twice: %v, want accounting and non-overlap violations", err)
	}
}

func TestLogResolutionRecorded(t *testing.T) {
	o := vlOnly(t, vlFile(t, "v1_estimate.log"))
	for _, c := range []struct {
		field string
		want  float64
	}{
		{FieldAvailableKV, 10737418.24},  // %s of format_gib: 0.01 GiB
		{FieldModelWeight, 10737418.24},  // "14.99 GiB memory"
		{SumSuggestedKVRequested, 1},     // exact bytes
		{FieldKVCacheTokens, 1},          // a count
		{FieldMaxConcurrency, 0.01},      // %.2fx
		{FieldCUDAGraphApplied, 0},       // a flag
		{FieldInitialTotal, 10737418.24}, // "(78.57/79.18 GiB)"
		{SumCUDAGraphPoolEstimate, 10737418.24},
	} {
		if got := o.Sources[c.field].Resolution; got != c.want {
			t.Errorf("%s resolution %v, want %v", c.field, got, c.want)
		}
	}
	// format_gib prints round(x, 2) with %s: "40.0" still means ±0.005 GiB.
	o = vlOnly(t, vlFile(t, "v1_kv_cache_memory.log"))
	if got := o.Sources[FieldAvailableKV].Resolution; got != 10737418.24 {
		t.Errorf("\"40.0 GiB\" resolution %v, want 0.01 GiB", got)
	}
}

func TestUnitsExact(t *testing.T) {
	for _, c := range []struct {
		num, unit string
		gbIsGiB   bool
		want      int64
	}{
		{"14.9888", "GB", true, 16094101452}, // 149888 × 2^30 / 10^4 = 16094101451.57
		{"1.5", "GB", false, 1_500_000_000},
		{"512", "MiB", false, 536870912},
		{"-0.3", "GiB", false, -322122547},
		{"0.5", "Gib", false, 536870912},
		{"2.25", "MB", false, 2_250_000},
		{"0.000000001", "GiB", false, 1},   // 1.07 bytes rounds to 1
		{"0.00048828125", "KiB", false, 1}, // exactly half a byte: away from zero
		{"-0.00048828125", "KiB", false, -1},
	} {
		u, ok := vllmlog.UnitBytes(c.unit, c.gbIsGiB)
		if !ok {
			t.Fatalf("unit %s unknown", c.unit)
		}
		d, err := vllmlog.ParseDecimal(c.num)
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.Bytes(u)
		if err != nil || got != c.want {
			t.Errorf("%s %s (gb=GiB %v) = %d, %v; want %d", c.num, c.unit, c.gbIsGiB, got, err, c.want)
		}
	}
	for _, bad := range []string{"1e9", "1.", ".5", "+1", "1.2.3", "", "0x10"} {
		if _, err := vllmlog.ParseDecimal(bad); err == nil {
			t.Errorf("%q parsed as a decimal", bad)
		}
	}
	for _, c := range []struct {
		s    string
		want int64
		ok   bool
	}{{"447,088", 447088, true}, {"2048", 2048, true}, {"1,0000", 0, false}, {"12,34", 0, false}, {",123", 0, false}, {"1,009,248", 1009248, true}} {
		got, err := vllmlog.ParseCount(c.s)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("count %q = %d, %v; want %d ok=%v", c.s, got, err, c.want, c.ok)
		}
	}
}

// TestRangeAndDeviceRejection: out-of-range values and values larger than
// the device are rejected with a typed reason and stay unknown.
func TestRangeAndDeviceRejection(t *testing.T) {
	text := "INFO 01-01 00:00:00 worker.py:241] the current vLLM instance can use total_gpu_memory (23.64GiB) x gpu_memory_utilization (1.50) = 35.46GiB\n" +
		"INFO 01-01 00:00:00 gpu_worker.py:231] Available KV cache memory: 60.00 GiB\n" +
		"INFO 01-01 00:00:00 gpu_model_runner.py:1329] Model loading took -1.0000 GiB and 4.8 seconds\n"
	dev := vlGiB(t, "23.64")
	l, err := vlText(t, text, VLLMLogOptions{GPUTotalBytes: &dev})
	if err != nil {
		t.Fatal(err)
	}
	o := vlOnly(t, l)
	vlWantNil(t, "util 1.50", o.GPUMemoryUtilization)
	vlWantNil(t, "available above the device", o.AvailableKVBytes)
	vlWantNil(t, "negative weights", o.ModelWeightBytes)
	vlWantNil(t, "requested above the device", o.RequestedBytes)
	vlWantGiB(t, "total", o.InitialTotalBytes, "23.64")
	got := map[string]RejectReason{}
	for _, r := range l.Rejected {
		got[r.Field] = r.Reason
	}
	want := map[string]RejectReason{FieldUtilization: RejectOutOfRange, FieldRequested: RejectExceedsDevice, FieldAvailableKV: RejectExceedsDevice, FieldModelWeight: RejectOutOfRange}
	for f, r := range want {
		if got[f] != r {
			t.Errorf("rejection of %s: %q, want %q (all: %+v)", f, got[f], r, l.Rejected)
		}
	}
}

func TestParseInconsistentLogFails(t *testing.T) {
	text := "INFO 01-14 12:36:52 worker.py:241] the current vLLM instance can use total_gpu_memory (79.15GiB) x gpu_memory_utilization (0.90) = 71.24GiB\n" +
		"INFO 01-14 12:36:52 worker.py:241] model weights take 14.99GiB; non_torch_memory takes 0.13GiB; PyTorch activation peak memory takes 1.23GiB; the rest of the memory reserved for KV Cache is 60.00GiB.\n"
	_, err := vlText(t, text, VLLMLogOptions{})
	if err == nil || !IsObservationError(err) || !strings.Contains(err.Error(), FieldAvailableKV) {
		t.Fatalf("inconsistent budget: %v, want a validation error naming %s", err, FieldAvailableKV)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error spans lines: %q", err)
	}
}

func TestNoMemoryLines(t *testing.T) {
	_, err := vlText(t, "hello\nINFO 01-01 00:00:00 api_server.py:1] vLLM API server version 0.9.0\n", VLLMLogOptions{})
	if !errors.Is(err, ErrNoMemoryLines) {
		t.Fatalf("%v, want ErrNoMemoryLines", err)
	}
	_, err = vlText(t, "", VLLMLogOptions{})
	if !errors.Is(err, ErrNoMemoryLines) {
		t.Fatalf("empty log: %v, want ErrNoMemoryLines", err)
	}
}

// TestLogSanitization: nothing but numbers, enums and pattern ids leaves
// the parser, whatever text the log carries (ADR-006 log sanitization).
func TestLogSanitization(t *testing.T) {
	text := "INFO 01-01 00:00:00 llm_engine.py:234] Initializing an LLM engine with config: model='/models/evil --trust-remote-code; rm -rf /', tokenizer='$(curl x)'\n" +
		"(VllmWorker rank=0 pid=7) INFO 01-01 00:00:05 [gpu_model_runner.py:1329] Model loading took 7.5103 GiB and 4.8 seconds `--trust-remote-code; rm -rf /`\n" +
		"(VllmWorker rank=0 pid=7) INFO 01-01 00:00:12 [gpu_worker.py:231] Available KV cache memory: 61.60 GiB; model=/models/evil\n"
	l, err := vlText(t, text, VLLMLogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := canon.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"rm -rf", "trust-remote-code", "/models", "evil", "curl", "gpu_worker.py", "VllmWorker", "INFO"} {
		if bytes.Contains(b, []byte(leak)) {
			t.Errorf("parser output carries %q from the log: %s", leak, b)
		}
	}
}

func TestRestartKeepsLastStartup(t *testing.T) {
	text := "INFO 01-01 00:00:01 model_runner.py:1099] Loading model weights took 14.9888 GB\n" +
		"INFO 01-01 00:00:02 gpu_executor.py:76] # GPU blocks: 100, # CPU blocks: 0\n" +
		"INFO 01-01 00:00:03 worker.py:241] model weights take 14.99GiB; non_torch_memory takes 9.99GiB; PyTorch activation peak memory takes 1.23GiB; the rest of the memory reserved for KV Cache is 1.00GiB.\n" +
		"INFO 01-01 00:10:01 model_runner.py:1099] Loading model weights took 15.0001 GB\n"
	l, err := vlText(t, text, VLLMLogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o := vlOnly(t, l)
	vlWantGiB(t, "weights of the second startup", o.ModelWeightBytes, "15.0001")
	vlWantNil(t, "non-torch of the first startup", o.NonTorchIncreaseBytes)
	vlWantNil(t, "blocks printed before the second startup", o.NumGPUBlocks)
}

func TestColouredPrefixAndContinuation(t *testing.T) {
	text := "\x1b[1;36m(VllmWorkerProcess pid=12)\x1b[0;0m INFO 01-14 12:36:52 worker.py:240] Memory profiling takes 1.46 seconds\n" +
		"the current vLLM instance can use total_gpu_memory (23.55GiB) x\n" +
		"gpu_memory_utilization (0.90) = 21.19GiB\n" +
		"model weights take 7.97GiB; non_torch_memory takes 0.09GiB; PyTorch activation peak memory takes 1.22GiB;\n" +
		"the rest of the memory reserved for KV Cache is 11.91GiB.\n"
	l, err := vlText(t, text, VLLMLogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o := vlOnly(t, l)
	vlWantGiB(t, "total", o.InitialTotalBytes, "23.55")
	vlWantGiB(t, "requested", o.RequestedBytes, "21.19")
	vlWantGiB(t, "available", o.AvailableKVBytes, "11.91")
	vlWantGiB(t, "weights", o.ModelWeightBytes, "7.97")
}

func TestParseDeterministic(t *testing.T) {
	var first []byte
	for i := 0; i < 3; i++ {
		for _, name := range []string{"v0_6_6_single.log", "v1_tp2_debug.log", "v1_estimate.log", "v1_tp4_workers.log", "v1_pp2_tp2.log"} {
			b, err := canon.Marshal(vlFile(t, name))
			if err != nil {
				t.Fatal(err)
			}
			if name == "v1_tp4_workers.log" {
				if first == nil {
					first = b
				} else if !bytes.Equal(first, b) {
					t.Fatalf("run %d: output differs", i)
				}
			}
		}
	}
}

func TestParsedObservationsEncode(t *testing.T) {
	for _, name := range []string{"v0_6_4_results.log", "v0_6_6_single.log", "v0_tp2_workers.log", "v1_tp2_debug.log", "v1_estimate.log", "v1_kv_cache_memory.log", "v1_tp4_workers.log", "v1_pp2_tp2.log"} {
		for _, o := range vlFile(t, name).Observations {
			if _, d, err := o.Encode(); err != nil || !canon.IsDigest(d) {
				t.Errorf("%s: encode: %v", name, err)
			}
		}
	}
}

// TestPatternNeedles: every pattern has a literal pre-check, and the
// pre-check never hides a match the expression would find.
func TestPatternNeedles(t *testing.T) {
	for _, p := range vllmlog.MemoryPatterns() {
		if len(p.Needle) < 4 {
			t.Errorf("%s: needle %q is too short to filter lines", p.ID, p.Needle)
		}
	}
	for _, name := range []string{"v0_6_4_results.log", "v0_6_6_single.log", "v1_estimate.log", "v1_tp2_debug.log"} {
		b, err := os.ReadFile(filepath.Join("testdata", "vllmlog", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			for _, p := range vllmlog.MemoryPatterns() {
				if p.Re.MatchString(line) && !strings.Contains(line, p.Needle) {
					t.Errorf("%s: needle %q misses %q", p.ID, p.Needle, line)
				}
			}
		}
	}
}

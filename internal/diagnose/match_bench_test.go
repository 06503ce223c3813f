package diagnose

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// benchLog builds a serving log of about size bytes: start-up lines,
// throughput and access lines from several processes (some coloured),
// with a KV-cache failure at the end.
func benchLog(size int) []byte {
	var b bytes.Buffer
	b.Grow(size + 4096)
	head := "INFO 05-06 12:00:00 [core.py:74] Initializing a V1 LLM engine (v0.10.1.1) with config: model='/m', dtype=torch.bfloat16, max_seq_len=131072, tensor_parallel_size=2, pipeline_parallel_size=1, quantization=None\n"
	b.WriteString(head)
	tail := `(EngineCore_DP0 pid=4242) ERROR 05-06 13:00:00 [core.py:700] Traceback (most recent call last):
(EngineCore_DP0 pid=4242) ERROR 05-06 13:00:00 [core.py:700]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", line 683, in check_enough_kv_cache_memory
(EngineCore_DP0 pid=4242) ERROR 05-06 13:00:00 [core.py:700] ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (3.50 GiB). Try increasing ` + "`gpu_memory_utilization`" + ` or decreasing ` + "`max_model_len`" + ` when initializing the engine.
`
	for i := 0; b.Len() < size-len(tail); i++ {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "(APIServer pid=1) INFO 05-06 12:%02d:%02d [loggers.py:123] Engine 000: Avg prompt throughput: %d.%d tokens/s, Avg generation throughput: %d.1 tokens/s, Running: %d reqs, Waiting: 0 reqs, GPU KV cache usage: 12.%d%%, Prefix cache hit rate: 71.0%%\n", i/60%60, i%60, i%997, i%10, i%503, i%64, i%10)
		case 1:
			fmt.Fprintf(&b, "(APIServer pid=1) INFO:     10.0.%d.%d:%d - \"POST /v1/chat/completions HTTP/1.1\" 200 OK\n", i%256, i%200, 30000+i%30000)
		case 2:
			fmt.Fprintf(&b, "(EngineCore_DP0 pid=4242) \x1b[32mDEBUG\x1b[0m 05-06 12:%02d:%02d [scheduler.py:%d] Scheduled %d requests, %d tokens, preempted 0\n", i/60%60, i%60, 100+i%900, i%64, i%8192)
		case 3:
			fmt.Fprintf(&b, "(VllmWorker TP%d pid=%d) DEBUG 05-06 12:%02d:%02d [gpu_model_runner.py:%d] step %d took %d.%03d ms\n", i%2, 5000+i%2, i/60%60, i%60, 1000+i%100, i, i%40, i%1000)
		}
	}
	b.WriteString(tail)
	return b.Bytes()
}

// BenchmarkDiagnose100MB: a 100 MB log must diagnose in under a second.
func BenchmarkDiagnose100MB(b *testing.B) {
	log := benchLog(100 << 20)
	d, err := Diagnose(bytes.NewReader(log), Options{})
	if err != nil || d.Family != FamilyOOMKVCache {
		b.Fatalf("benchmark log diagnosed as %s (%v)", d.Family, err)
	}
	b.SetBytes(int64(len(log)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Diagnose(bytes.NewReader(log), Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBenchLogDiagnoses keeps the benchmark's input honest at a small
// size: it is a recognisable failure with its facts.
func TestBenchLogDiagnoses(t *testing.T) {
	log := benchLog(1 << 20)
	d, err := Diagnose(bytes.NewReader(log), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Family != FamilyOOMKVCache || d.Facts.MaxModelLen == nil || *d.Facts.MaxModelLen != 131072 || d.Facts.TensorParallelSize == nil {
		t.Errorf("%s %+v", d.Family, d.Facts)
	}
	if !strings.Contains(string(log[:200]), "Initializing") {
		t.Error("log head missing")
	}
}

// TestScanStateBounded: a log with thousands of exceptions and hits keeps
// capped tables.
func TestScanStateBounded(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&b, "(W pid=%d) ERROR 01-01 00:00:00 [a.py:1] ValueError: Total number of attention heads (%d) must be divisible by tensor parallel size (3).\n", i, i+1)
		fmt.Fprintf(&b, "RuntimeError: NCCL error: unhandled system error %d\n", i)
	}
	st := newScanState()
	lr := newLineReader(strings.NewReader(b.String()), 0)
	for n := 1; ; n++ {
		raw, err := lr.next()
		if err != nil {
			break
		}
		st.line(raw, n)
	}
	if len(st.exceptions) > maxExceptions || len(st.hits) > maxHitsPerMatcher*len(matchers) || len(st.rejected) > maxRejections {
		t.Errorf("exceptions %d hits %d rejections %d", len(st.exceptions), len(st.hits), len(st.rejected))
	}
	d := st.finish(hardware{})
	if d.Family != FamilyTPDivisibility || len(d.Evidence) > maxEvidence {
		t.Errorf("%s evidence %d", d.Family, len(d.Evidence))
	}
}

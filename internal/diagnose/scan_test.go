package diagnose

import (
	"io"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/vllmlog"
)

func TestSplitLine(t *testing.T) {
	cases := []struct {
		raw   string
		proc  procKey
		level vllmlog.Level
		file  string
		msg   string
	}{
		{"INFO 05-06 12:00:00 [core.py:74] Initializing", procKey{}, vllmlog.LevelInfo, "core", "Initializing"},
		{"INFO 08-19 07:51:03 model_runner.py:732] Loading model weights took 2.3463 GB", procKey{}, vllmlog.LevelInfo, "model_runner", "Loading model weights took 2.3463 GB"},
		{"(EngineCore_DP0 pid=4242) ERROR 05-06 12:00:31 [core.py:700]   File \"/x/vllm/v1/core/kv_cache_utils.py\", line 1, in f", procKey{1, 4242}, vllmlog.LevelError, "core", "  File \"/x/vllm/v1/core/kv_cache_utils.py\", line 1, in f"},
		{"(VllmWorker TP1 pid=12) WARNING 05-06 12:00:31 [gpu_worker.py:1] hello", procKey{1, 12}, vllmlog.LevelWarning, "gpu_worker", "hello"},
		{"(VllmWorker rank=3 pid=1090) ERROR 06-05 06:18:13 [multiproc_executor.py:470] RuntimeError: CUDA error: out of memory", procKey{1, 1090}, vllmlog.LevelError, "multiproc_executor", "RuntimeError: CUDA error: out of memory"},
		{"(RayWorkerWrapper pid=880, ip=192.168.10.60) ERROR 04-16 01:01:44 [worker_base.py:620] RuntimeError: NCCL error [repeated 6x across cluster]", procKey{1, 880}, vllmlog.LevelError, "worker_base", "RuntimeError: NCCL error"},
		{"(pid=77) INFO 01-01 00:00:00 [x.py:1] m", procKey{1, 77}, vllmlog.LevelInfo, "x", "m"},
		{"[rank0]:   File \"/x/vllm/worker/worker.py\", line 2, in g", procKey{2, 0}, vllmlog.LevelNone, "", "  File \"/x/vllm/worker/worker.py\", line 2, in g"},
		{"\x1b[32mINFO\x1b[0m 11-02 08:14:51 [api_server.py:1896] vLLM API server version 0.11.0", procKey{}, vllmlog.LevelInfo, "api_server", "vLLM API server version 0.11.0"},
		{"2025-04-11T09:30:12.481923Z ERROR 04-11 09:30:12 [core.py:387] boom", procKey{}, vllmlog.LevelError, "core", "boom"},
		{"qwen3-vl-32b  | (EngineCore_DP0 pid=413) ERROR 11-10 12:30:57 [core.py:710] EngineCore encountered a fatal error.", procKey{1, 413}, vllmlog.LevelError, "core", "EngineCore encountered a fatal error."},
		{"ERROR:    [Errno 98] error while attempting to bind", procKey{}, vllmlog.LevelError, "", "[Errno 98] error while attempting to bind"},
		{"INFO:     127.0.0.1:5 - \"POST /v1/chat/completions HTTP/1.1\" 400 Bad Request", procKey{}, vllmlog.LevelInfo, "", "127.0.0.1:5 - \"POST /v1/chat/completions HTTP/1.1\" 400 Bad Request"},
		{"Killed", procKey{}, vllmlog.LevelNone, "", "Killed"},
		{"  File \"/usr/lib/vllm/x.py\", line 1, in f", procKey{}, vllmlog.LevelNone, "", "  File \"/usr/lib/vllm/x.py\", line 1, in f"},
	}
	for _, c := range cases {
		ln := splitLine([]byte(c.raw), 1)
		if ln.proc != c.proc || ln.level != c.level || ln.file != c.file || ln.msg != c.msg {
			t.Errorf("%q\n got proc=%v level=%d file=%q msg=%q\nwant proc=%v level=%d file=%q msg=%q", c.raw, ln.proc, ln.level, ln.file, ln.msg, c.proc, c.level, c.file, c.msg)
		}
	}
}

func TestEngineModule(t *testing.T) {
	cases := map[string]string{
		"/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py": "vllm.v1.worker.gpu_worker",
		"/home/u/vllm/vllm/v1/core/kv_cache_utils.py":                          "vllm.v1.core.kv_cache_utils",
		"/opt/vllm/vllm/config/__init__.py":                                    "vllm.config",
		"vllm/config.py":                                                       "vllm.config",
		"/usr/lib/python3.12/multiprocessing/process.py":                       "",
		"/usr/local/lib/python3.12/dist-packages/torch/cuda/graphs.py":         "",
		"/x/vllm/v1/$(id)/x.py":                                                "",
		`C:\venv\Lib\site-packages\vllm\worker\worker.py`:                      "vllm.worker.worker",
	}
	for path, want := range cases {
		if got := engineModule(path); got != want {
			t.Errorf("engineModule(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestTruncatedLineStillDiagnosed: a failure message behind a multi-MB
// line prefix still reads its head, and the count is reported.
func TestTruncatedLineStillDiagnosed(t *testing.T) {
	log := "ValueError: Total number of attention heads (32) must be divisible by tensor parallel size (3)." + strings.Repeat(" pad", 1<<20) + "\n"
	d, err := Diagnose(strings.NewReader(log), Options{MaxLineBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if d.Family != FamilyTPDivisibility || d.TruncatedLines != 1 || d.Lines != 1 {
		t.Errorf("family %s truncated %d lines %d", d.Family, d.TruncatedLines, d.Lines)
	}
}

// TestInterleavedTracebacks: two ranks' tracebacks, line by line
// interleaved, are assembled per process; each keeps its own call site.
func TestInterleavedTracebacks(t *testing.T) {
	log := strings.Join([]string{
		"(W pid=1) ERROR 01-01 00:00:00 [a.py:1] Traceback (most recent call last):",
		"(W pid=2) ERROR 01-01 00:00:00 [a.py:1] Traceback (most recent call last):",
		`(W pid=1) ERROR 01-01 00:00:00 [a.py:1]   File "/x/vllm/distributed/parallel_state.py", line 1, in f`,
		`(W pid=2) ERROR 01-01 00:00:00 [a.py:1]   File "/x/vllm/v1/worker/gpu_worker.py", line 1, in g`,
		"(W pid=2) ERROR 01-01 00:00:00 [a.py:1]     raise ValueError(",
		"(W pid=1) ERROR 01-01 00:00:00 [a.py:1] RuntimeError: one",
		"(W pid=2) ERROR 01-01 00:00:00 [a.py:1] ValueError: two",
	}, "\n")
	st := newScanState()
	lr := newLineReader(strings.NewReader(log), 0)
	for n := 1; ; n++ {
		b, err := lr.next()
		if err == io.EOF {
			break
		}
		st.line(b, n)
	}
	if len(st.exceptions) != 2 {
		t.Fatalf("%d exceptions, want 2", len(st.exceptions))
	}
	e1, e2 := st.exceptions[0], st.exceptions[1]
	if e1.class != "RuntimeError" || e1.innermost() != "vllm.distributed.parallel_state" {
		t.Errorf("pid 1: %s at %s", e1.class, e1.innermost())
	}
	if e2.class != "ValueError" || e2.innermost() != "vllm.v1.worker.gpu_worker" {
		t.Errorf("pid 2: %s at %s", e2.class, e2.innermost())
	}
}

// TestProcessCapBounded: more processes than the cap share one slot
// instead of growing the table.
func TestProcessCapBounded(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 5*maxProcs; i++ {
		b.WriteString("(W pid=")
		b.WriteString(strings.Repeat("1", 1) + itoa(i))
		b.WriteString(") INFO 01-01 00:00:00 [a.py:1] hello\n")
	}
	st := newScanState()
	lr := newLineReader(strings.NewReader(b.String()), 0)
	for n := 1; ; n++ {
		raw, err := lr.next()
		if err == io.EOF {
			break
		}
		st.line(raw, n)
	}
	if len(st.procs) > maxProcs {
		t.Errorf("%d processes tracked, cap %d", len(st.procs), maxProcs)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var d []byte
	for ; i > 0; i /= 10 {
		d = append([]byte{byte('0' + i%10)}, d...)
	}
	return string(d)
}

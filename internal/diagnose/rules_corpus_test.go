package diagnose

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// rulesCorpusCase is the correction a corpus log must yield: the ranked
// changes (path=value, "artifact" for another checkpoint) and the needs,
// computed by hand from the log's figures (see the worked examples in
// TestKVTooSmallComputesFromReportedMemory); gpu is the operator's --gpu
// ("" = the sidecar's option, or none).
type rulesCorpusCase struct {
	gpu     string
	changes []string
	needs   []string
}

// TestCorpusCorrections runs every corpus log through Diagnose and
// Remediate and checks the corrected values. Worked numbers:
//   - kv_v1_needed: (3.50 GiB − 0.005) / ⌈(16 GiB + 0.005) / 131072⌉ = 131113 B
//     → 28622 → 28608 (below vLLM's 28672); an L4 cannot hold 16 GiB at any
//     utilization;
//   - kv_v1_tp2_interleaved: 163881 B per token → 127072; utilization
//     0.9 + (20 − 19.40 + 0.01) GiB / 79.18 GiB → 0.91; fp8 halves 20 GiB;
//   - kv_v1_ansi: 0.9 + 1.60 / 79.18 → 0.93;
//   - freemem_v1: ⌊(10.50 − 0.005) / 79.18⌋₀.₀₁ = 0.13;
//   - graph_v1_tp: 0.9 − (1.75 − 1.12 + 0.01) / 178.35 → 0.89;
//   - tp_v1: 28 heads at TP 3 → 2 below, 4 above.
func TestCorpusCorrections(t *testing.T) {
	want := map[string]rulesCorpusCase{
		"arch_v0":                      {gpu: "", changes: []string{}, needs: []string{"operator_choice:engine_version"}},
		"arch_v1":                      {gpu: "", changes: []string{}, needs: []string{"operator_choice:engine_version"}},
		"autofit_v1":                   {gpu: "", changes: []string{}, needs: []string{"model_dir:kv_bytes_per_token", "model_dir:activation_peak"}},
		"bf16_v0_t4":                   {gpu: "", changes: []string{"dtype=half"}, needs: []string{"model_dir:float32_fit"}},
		"bf16_v1_v100":                 {gpu: "", changes: []string{"dtype=half"}, needs: []string{"model_dir:float32_fit"}},
		"chat_template":                {gpu: "", changes: []string{}, needs: []string{"operator_choice:chat_template"}},
		"enginedead_v0":                {gpu: "", changes: []string{}, needs: []string{"root_cause:earlier_failure"}},
		"enginedead_v1":                {gpu: "", changes: []string{}, needs: []string{"root_cause:earlier_failure"}},
		"enginedead_v1_dp_interleaved": {gpu: "", changes: []string{}, needs: []string{"root_cause:earlier_failure"}},
		"fp16_gemma2":                  {gpu: "a100-80gb", changes: []string{"dtype=bfloat16"}, needs: []string{}},
		"freemem_v1":                   {gpu: "", changes: []string{"gpu_memory_utilization=0.13"}, needs: []string{}},
		"freemem_v1_old":               {gpu: "", changes: []string{"gpu_memory_utilization=0.86"}, needs: []string{}},
		"gated_401":                    {gpu: "", changes: []string{}, needs: []string{"credential:hub_token"}},
		"gated_v1":                     {gpu: "", changes: []string{}, needs: []string{"credential:hub_token"}},
		"graph_v0":                     {gpu: "", changes: []string{"gpu_memory_utilization=0.89", "enforce_eager=true", "cudagraph_capture_sizes=[1,2,4,8,16,24,32,40,48,56,64,72,80,88,96,104,112,120,128,136,144,152,160,168,176,184,192,200,208,216,224,232,240,248,256]"}, needs: []string{}},
		"graph_v1_runtime_error":       {gpu: "", changes: []string{"enforce_eager=true", "cudagraph_capture_sizes=[1,2,4,8,16,24,32,40,48,56,64,72,80,88,96,104,112,120,128,136,144,152,160,168,176,184,192,200,208,216,224,232,240,248,256]"}, needs: []string{"log_fact:tried_to_allocate_bytes"}},
		"graph_v1_tp":                  {gpu: "", changes: []string{"gpu_memory_utilization=0.89", "enforce_eager=true", "cudagraph_capture_sizes=[1,2,4,8,16,24,32,40,48,56,64,72,80,88,96,104,112,120,128,136,144,152,160,168,176,184,192,200,208,216,224,232,240,248,256]"}, needs: []string{}},
		"healthy":                      {gpu: "", changes: []string{}, needs: []string{"root_cause:a recognized failure"}},
		"killed_core_proc":             {gpu: "", changes: []string{}, needs: []string{"root_cause:host_memory"}},
		"killed_died_unexpectedly":     {gpu: "", changes: []string{}, needs: []string{"root_cause:host_memory"}},
		"killed_shell":                 {gpu: "", changes: []string{}, needs: []string{"root_cause:host_memory"}},
		"killed_v0_exitcode":           {gpu: "", changes: []string{}, needs: []string{"root_cause:host_memory"}},
		"kv_v0_tokens":                 {gpu: "a100-80gb", changes: []string{"max_model_len=27296"}, needs: []string{"log_fact:kv_needed_bytes"}},
		"kv_v0_tokens_mp":              {gpu: "", changes: []string{"max_model_len=104704"}, needs: []string{"log_fact:kv_needed_bytes"}},
		"kv_v1_ansi":                   {gpu: "h100-sxm", changes: []string{"gpu_memory_utilization=0.93", "max_model_len=34400", "kv_cache_dtype=fp8"}, needs: []string{}},
		"kv_v1_needed":                 {gpu: "l4", changes: []string{"max_model_len=28608"}, needs: []string{}},
		"kv_v1_no_paren":               {gpu: "", changes: []string{"max_model_len=69312"}, needs: []string{"gpu:gpu_total_memory"}},
		"kv_v1_tp2_interleaved":        {gpu: "h100-sxm", changes: []string{"gpu_memory_utilization=0.91", "max_model_len=127072", "kv_cache_dtype=fp8"}, needs: []string{}},
		"maxlen_pydantic":              {gpu: "", changes: []string{"max_model_len=32768"}, needs: []string{}},
		"maxlen_v0":                    {gpu: "", changes: []string{"max_model_len=32768"}, needs: []string{}},
		"nccl_ray":                     {gpu: "", changes: []string{}, needs: []string{"root_cause:network"}},
		"nccl_v0_mp":                   {gpu: "", changes: []string{}, needs: []string{"root_cause:network"}},
		"nccl_v1":                      {gpu: "", changes: []string{}, needs: []string{"root_cause:network"}},
		"nixl_decode":                  {gpu: "", changes: []string{}, needs: []string{"fleet:engine_contract"}},
		"nixl_hash":                    {gpu: "", changes: []string{}, needs: []string{"fleet:engine_contract"}},
		"noblocks_v0":                  {gpu: "", changes: []string{}, needs: []string{"model_dir:kv_bytes_per_token", "model_dir:activation_peak"}},
		"noblocks_v1":                  {gpu: "", changes: []string{}, needs: []string{"model_dir:kv_bytes_per_token", "model_dir:activation_peak"}},
		"port_oserror":                 {gpu: "", changes: []string{}, needs: []string{"operator_choice:port"}},
		"port_uvicorn":                 {gpu: "", changes: []string{}, needs: []string{"operator_choice:port"}},
		"quant_awq_v100":               {gpu: "", changes: []string{}, needs: []string{}},
		"quant_fp8_t4":                 {gpu: "", changes: []string{}, needs: []string{}},
		"quant_scheme_ct":              {gpu: "", changes: []string{}, needs: []string{}},
		"reject_exceeds_device":        {gpu: "", changes: []string{"gpu_memory_utilization=0.43"}, needs: []string{}},
		"reject_free_gt_total":         {gpu: "", changes: []string{}, needs: []string{"log_fact:free_memory_bytes"}},
		"tp_v0":                        {gpu: "", changes: []string{"tensor_parallel_size=2", "tensor_parallel_size=4"}, needs: []string{}},
		"tp_v1":                        {gpu: "", changes: []string{"tensor_parallel_size=2", "tensor_parallel_size=4"}, needs: []string{}},
		"clean_shutdown":               {gpu: "", changes: []string{}, needs: []string{"root_cause:a recognized failure"}},
		"unrec_inspect":                {gpu: "", changes: []string{}, needs: []string{"root_cause:a recognized failure"}},
		"unrec_oom_kvalloc":            {gpu: "", changes: []string{}, needs: []string{"root_cause:a recognized failure"}},
		"unrec_profile_assert":         {gpu: "", changes: []string{}, needs: []string{"root_cause:a recognized failure"}},
		"unrec_segfault":               {gpu: "", changes: []string{}, needs: []string{"root_cause:a recognized failure"}},
		"weights_v0":                   {gpu: "", changes: []string{"quantization=fp8", "artifact"}, needs: []string{"model_dir:weight_bytes_per_rank"}},
		"weights_v1":                   {gpu: "h100-sxm", changes: []string{"quantization=fp8", "artifact"}, needs: []string{"model_dir:weight_bytes_per_rank"}},
		"weights_v1_worker_tp":         {gpu: "", changes: []string{"artifact"}, needs: []string{"model_dir:weight_bytes_per_rank", "gpu:compute_capability"}},
	}
	logs, err := filepath.Glob("testdata/corpus/*.log")
	if err != nil || len(logs) < 40 {
		t.Fatalf("corpus: %d logs, %v", len(logs), err)
	}
	for _, lf := range logs {
		name := strings.TrimSuffix(filepath.Base(lf), ".log")
		t.Run(name, func(t *testing.T) {
			w, ok := want[name]
			if !ok {
				t.Fatalf("no expected corrections for corpus log %s: add it to the table", name)
			}
			var side struct {
				Options struct {
					GPU         string `json:"gpu"`
					ModelMaxLen *int64 `json:"model_max_len"`
				} `json:"options"`
			}
			b, err := os.ReadFile(strings.TrimSuffix(lf, ".log") + ".json")
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &side); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(lf)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			d, err := Diagnose(f, Options{GPU: side.Options.GPU, ModelMaxLen: side.Options.ModelMaxLen})
			if err != nil {
				t.Fatal(err)
			}
			in := Input{}
			if g := cmpOr(w.gpu, side.Options.GPU); g != "" {
				in.GPU = rtGPU(t, g)
			}
			base := rtOperatorPlan(t)
			base.Port = 0
			in.Plan = &base
			r, err := Remediate(d, in)
			if err != nil {
				t.Fatal(err)
			}
			if got := rtChanges(r); !slices.Equal(nonNil(got), w.changes) {
				t.Errorf("corrections %#v, want %#v", got, w.changes)
			}
			if got := rtNeeds(r); !slices.Equal(nonNil(got), w.needs) {
				t.Errorf("needs %#v, want %#v", got, w.needs)
			}
			checkRendered(t, r)
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

package memory

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/evidence/artifact/fixture"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// corpusCase is one sidecar of testdata/corpus/startup: a real vLLM
// startup log from a public issue, the launch it states and the figures
// it logged (see the sidecar's "where" for what came from where).
type corpusCase struct {
	Name        string   `json:"-"`
	Source      string   `json:"source"`
	Where       string   `json:"where"`
	Version     string   `json:"vllm_version"`
	Model       string   `json:"model"`
	GPU         string   `json:"gpu"`
	TP          int      `json:"tp"`
	PP          int      `json:"pp"`
	DP          int      `json:"dp"`
	EP          bool     `json:"ep"`
	MaxModelLen *int64   `json:"max_model_len"`
	Util        *float64 `json:"gpu_memory_utilization"`
	DType       string   `json:"dtype"`
	KVDType     string   `json:"kv_cache_dtype"`
	Quant       string   `json:"quantization"`
	Logged      struct {
		WeightsGiB *float64 `json:"weights_gib"`
		KVGiB      *float64 `json:"kv_gib"`
		KVTokens   *int64   `json:"kv_tokens"`
		GPUBlocks  *int64   `json:"gpu_blocks"`
		Outcome    string   `json:"outcome"`
	} `json:"logged"`
	Fixture string `json:"fixture"`
	// EnforceEager is an optional extra: --enforce-eager on the command
	// line (no CUDA graphs, so none subtracted from the KV budget).
	EnforceEager bool `json:"enforce_eager"`
}

// corpusFixtures maps a sidecar's "fixture" to the preset it names.
var corpusFixtures = map[string]func() fixture.Model{
	"Llama31_8B":     func() fixture.Model { return fixture.Llama31_8B() },
	"Llama31_70B":    func() fixture.Model { return fixture.Llama31_70B() },
	"Qwen3_30B_A3B":  func() fixture.Model { return fixture.Qwen3_30B_A3B() },
	"DeepSeekV2Lite": func() fixture.Model { return fixture.DeepSeekV2Lite() },
	"Gemma2_9B":      func() fixture.Model { return fixture.Gemma2_9B() },
	"GptOss20B":      func() fixture.Model { return fixture.GptOss20B() },
	"GptOss120B":     func() fixture.Model { return fixture.GptOss120B() },
}

func loadCorpus(t *testing.T) []corpusCase {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "corpus", "startup", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []corpusCase
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var c corpusCase
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		c.Name = strings.TrimSuffix(filepath.Base(p), ".json")
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// TestCorpusStartupWellFormed holds every case to the brief's minimum: a
// source, a model, a GPU, TP, a log beside it and at least one logged
// figure or outcome.
func TestCorpusStartupWellFormed(t *testing.T) {
	cases := loadCorpus(t)
	if len(cases) == 0 {
		t.Fatal("empty corpus")
	}
	for _, c := range cases {
		if !strings.HasPrefix(c.Source, "https://github.com/") || c.Model == "" || c.GPU == "" || c.TP < 1 {
			t.Errorf("%s: source, model, gpu and tp are required: %+v", c.Name, c)
		}
		if _, err := os.Stat(filepath.Join("testdata", "corpus", "startup", c.Name+".log")); err != nil {
			t.Errorf("%s: no log beside the sidecar: %v", c.Name, err)
		}
		l := c.Logged
		if l.WeightsGiB == nil && l.KVGiB == nil && l.KVTokens == nil && l.GPUBlocks == nil && l.Outcome == "" {
			t.Errorf("%s: no logged figure", c.Name)
		}
		if _, ok := corpusFixtures[c.Fixture]; c.Fixture != "" && !ok {
			t.Errorf("%s: fixture %q is not a preset", c.Name, c.Fixture)
		}
	}
}

// corpusRow is one case's comparison; an empty Unknown means planned.
type corpusRow struct {
	c               corpusCase
	Unknown         string
	WErr, KVErr     *float64
	FitsRight, InKV *bool
}

func planCorpusCase(t *testing.T, c corpusCase) corpusRow {
	r := corpusRow{c: c}
	mk, ok := corpusFixtures[c.Fixture]
	if !ok {
		r.Unknown = "no fixture for " + c.Model
		return r
	}
	g, err := LookupGPU(c.GPU)
	if err != nil {
		r.Unknown = "GPU not in the table: " + c.GPU
		return r
	}
	l := LaunchConfig{TP: c.TP, PP: max(c.PP, 1), DP: max(c.DP, 1), EnableExpertParallel: c.EP, KVCacheDType: c.KVDType, EnforceEager: c.EnforceEager}
	if c.MaxModelLen != nil {
		l.MaxModelLen = *c.MaxModelLen
	}
	if c.Util != nil {
		l.GPUMemoryUtilization = *c.Util
	}
	h, cfg := headersOf(t, fixture.Build(mk(), 1))
	p, err := Plan(PlanInput{Headers: h, Config: cfg, Hardware: HardwareFor(g, 0), Facts: mustFacts(t, corpusVersion(c.Version)), Launch: l, Calibration: mustSeed(t)})
	if err != nil {
		r.Unknown = "plan: " + err.Error()
		return r
	}
	if w := c.Logged.WeightsGiB; w != nil && p.WeightBytesPerRank.Known() {
		e := float64(p.WeightBytesPerRank.Bytes)/giB / *w - 1
		r.WErr = &e
	}
	if kv := c.Logged.KVGiB; kv != nil && *kv > 0 && p.AvailableKVBytes.Known() {
		e := float64(p.AvailableKVBytes.Bytes)/giB / *kv - 1
		in := *kv*giB >= float64(p.AvailableKVBytes.Lower) && *kv*giB <= float64(p.AvailableKVBytes.Upper)
		r.KVErr, r.InKV = &e, &in
	}
	if !p.AvailableKVBytes.Known() {
		// No KV budget, no verdict: say why instead of guessing.
		r.Unknown = "KV unknown: " + p.AvailableKVBytes.Reason
		if len(p.UnknownReasons) > 0 {
			r.Unknown += ": " + strings.Join(p.UnknownReasons, "; ")
		}
		return r
	}
	if o := c.Logged.Outcome; o != "" {
		right := p.Fits == (o == "started")
		r.FitsRight = &right
	}
	return r
}

// TestCorpusStartup plans every corpus case that has a fixture and
// compares it with what the log says. Today the corpus is far smaller
// than the 60 cases, so the bounds are logged, and the
// measured figures are asserted only as floors over the cases planned.
func TestCorpusStartup(t *testing.T) {
	var rows []corpusRow
	for _, c := range loadCorpus(t) {
		rows = append(rows, planCorpusCase(t, c))
	}
	tab := corpusTable(rows)
	t.Log("\n" + tab)
	if os.Getenv("NARWHAL_WRITE_TABLES") == "1" {
		testkit.WriteDocSection(t, filepath.Join("..", "..", "..", "docs", "memory-plan.md"), "corpus-startup", tab)
	}
	// Floors measured on 2026-12-02 (16 cases, 8 with a fixture): 4 of 6
	// compared weights within ±3 % (both misses are gpt-oss-120b on H100,
	// predicted 5.6-7.9 % under what vLLM loads), every one of 4 fits
	// verdicts right. The KV bounds cannot be judged yet: one KV
	// budget compared (V0 0.6 is unknown to the calculator).
	wOK, wN := share(rows, func(r corpusRow) *bool { return within(r.WErr, 0.03) })
	fOK, fN := share(rows, func(r corpusRow) *bool { return r.FitsRight })
	if wOK < 4 {
		t.Errorf("weights: %d of %d within ±3 %%; the floor is 4", wOK, wN)
	}
	if fN < 4 || fOK != fN {
		t.Errorf("fits verdict: %d of %d right; the floor is all of at least 4", fOK, fN)
	}
	if wN > 0 && float64(wOK) < 0.9*float64(wN) {
		t.Logf("GAP: weights within ±3 %% on %d of %d (issue: ≥ 90 %%)", wOK, wN)
	}
	t.Logf("gap to the issue: %d cases (issue: ≥ 60); KV compared on %d", len(rows), func() int { _, n := share(rows, func(r corpusRow) *bool { return within(r.KVErr, 0.10) }); return n }())
	for _, r := range rows {
		if r.Unknown == "" && r.WErr == nil && r.KVErr == nil && r.FitsRight == nil {
			t.Errorf("%s: planned but nothing compared", r.c.Name)
		}
	}
}

// corpusVersion is the release a sidecar's vllm_version names ("0.6.4
// (log format …)" → 0.6.4, "0.7.x V0" → 0.7.0); the plan uses that
// release's engine facts, not today's.
func corpusVersion(v string) string {
	f := strings.Fields(v)
	if len(f) == 0 {
		return "0.11.0"
	}
	parts := strings.Split(strings.ReplaceAll(f[0], "x", "0"), ".")
	for len(parts) < 3 {
		parts = append(parts, "0")
	}
	return strings.Join(parts[:3], ".")
}

func share(rows []corpusRow, pick func(corpusRow) *bool) (int, int) {
	n, ok := 0, 0
	for _, r := range rows {
		if b := pick(r); b != nil {
			n++
			if *b {
				ok++
			}
		}
	}
	return ok, n
}

func within(e *float64, tol float64) *bool {
	if e == nil {
		return nil
	}
	b := math.Abs(*e) <= tol
	return &b
}

func pct(e *float64) string {
	if e == nil {
		return "–"
	}
	return fmt.Sprintf("%+.1f %%", 100**e)
}

func yesNo(b *bool) string {
	switch {
	case b == nil:
		return "–"
	case *b:
		return "yes"
	}
	return "no"
}

func corpusTable(rows []corpusRow) string {
	var s strings.Builder
	s.WriteString("| case | model | GPU × TP | outcome | weights err | KV err | fits right | KV in band | note |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&s, "| [%s](%s) | %s | %s × %d | %s | %s | %s | %s | %s | %s |\n", r.c.Name, r.c.Source, r.c.Model, r.c.GPU, r.c.TP,
			r.c.Logged.Outcome, pct(r.WErr), pct(r.KVErr), yesNo(r.FitsRight), yesNo(r.InKV), r.Unknown)
	}
	wOK, wN := share(rows, func(r corpusRow) *bool { return within(r.WErr, 0.03) })
	kOK, kN := share(rows, func(r corpusRow) *bool { return within(r.KVErr, 0.10) })
	fOK, fN := share(rows, func(r corpusRow) *bool { return r.FitsRight })
	bOK, bN := share(rows, func(r corpusRow) *bool { return r.InKV })
	unknown := 0
	for _, r := range rows {
		if r.Unknown != "" {
			unknown++
		}
	}
	fmt.Fprintf(&s, "\n| total | cases | compared | within bound | issue bound |\n|---|---|---|---|---|\n")
	fmt.Fprintf(&s, "| weights ±3 %% | %d | %d | %d | ≥ 90 %% |\n", len(rows), wN, wOK)
	fmt.Fprintf(&s, "| KV ±10 %% | %d | %d | %d | ≥ 80 %% |\n", len(rows), kN, kOK)
	fmt.Fprintf(&s, "| fits verdict | %d | %d | %d | ≥ 90 %% |\n", len(rows), fN, fOK)
	fmt.Fprintf(&s, "| KV in 90 %% band | %d | %d | %d | ≥ 85 %% |\n", len(rows), bN, bOK)
	fmt.Fprintf(&s, "| unknown (reason stated) | %d | %d | | |\n", len(rows), unknown)
	return s.String()
}

package profile

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const baseRow = `"iid":"e0","ttft_a":1e-6,"ttft_b":1e-3,"ttft_c":0.01,"tpot_slope":1e-6,"tpot_intercept":0.01,
"decode_min_requests":1,"decode_max_requests":8,"decode_min_kv_tokens":10,"decode_max_kv_tokens":1000,
"decode_fit_mape":0.01,"decode_cv_mape":0.02`

func doc(rows ...string) string {
	return `{"schema":"narwhal.profiles","schema_version":1,"profiles":[{` + strings.Join(rows, `},{`) + `}]}`
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"ok", doc(baseRow), ""},
		{"bad schema", `{"schema":"x","schema_version":1,"profiles":[]}`, `schema must be "narwhal.profiles"`},
		{"newer version", `{"schema":"narwhal.profiles","schema_version":2,"profiles":[]}`, "schema_version 2 is not supported"},
		{"int bool", doc(baseRow + `,"kv_capacity_tokens":true`), "profile e0: kv_capacity_tokens must be a positive integer"},
		{"int string", doc(baseRow + `,"kv_capacity_tokens":"96"`), "profile e0: kv_capacity_tokens must be a positive integer"},
		{"int fraction", doc(baseRow + `,"kv_capacity_tokens":1.5`), "profile e0: kv_capacity_tokens must be a positive integer"},
		{"negative", doc(strings.Replace(baseRow, `"ttft_a":1e-6`, `"ttft_a":-1`, 1)), "profile e0: ttft_a must be ≥ 0"},
		{"missing", doc(strings.Replace(baseRow, `"tpot_slope":1e-6,`, ``, 1)), "profile e0: tpot_slope is required"},
		{"unknown", doc(baseRow + `,"tpot_slop":1`), "profile e0: tpot_slop is not a profile field"},
		{"min>max", doc(strings.Replace(baseRow, `"decode_min_requests":1`, `"decode_min_requests":9`, 1)), "decode_min_requests must be ≤ decode_max_requests"},
		{"capacity", doc(baseRow + `,"kv_capacity_tokens":10`), "kv_capacity_tokens must be ≥ decode_max_kv_tokens"},
		{"split alone", doc(baseRow + `,"ttft_split":0.1`), "ttft_block_tokens and ttft_split"},
		{"cached partial", doc(baseRow + `,"cached_ttft_a":0.1`), "nine cached_* fields"},
		{"digest", doc(baseRow + `,"generation_digest":"sha256:AB"`), "generation_digest must be sha256"},
		{"duplicate", doc(baseRow, baseRow), "profile e0: iid: duplicate row"},
		{"no iid", doc(`"ttft_a":1`), "profile 0: iid is required"},
		{"bad json", `{"schema":`, "not a narwhal.profiles document"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.in))
			if c.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func ip(v int) *int          { return &v }
func fp(v float64) *float64  { return &v }
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

func TestDerived(t *testing.T) {
	r := Row{IID: "e", TTFTA: 1e-6, TTFTB: 1e-3, TTFTC: 0.01, TPOTSlope: 1e-5, TPOTIntercept: 0.01,
		TPOTRequestSlope: fp(1e-3), PrefillMinTokens: ip(100), DecodeMaxRequests: ip(8), DecodeMaxKVTokens: ip(1000),
		TTFTBlockTokens: ip(512), TTFTSplit: fp(0.5)}
	cases := []struct {
		name      string
		got, want float64
	}{
		{"prefill below sweep", r.PrefillTime(10), 1e-6*100*100 + 1e-3*100 + 0.01},
		{"prefill", r.PrefillTime(200), 1e-6*200*200 + 1e-3*200 + 0.01},
		{"prefill split step", r.PrefillTime(600), 1e-6*600*600 + 1e-3*600 + 0.01 + 0.5},
		{"prefill whole blocks", r.PrefillTime(1024), 1e-6*1024*1024 + 1e-3*1024 + 0.01},
		{"interval", r.TokenInterval(500, 4), 1e-5*500 + 1e-3*4 + 0.01},
		{"MT", r.MT(0.02, 2), (0.02 - 0.01 - 0.002) / 1e-5},
		{"MT capped", r.MT(1, 2), 1000},
		{"MT too many", r.MT(1, 9), 0},
		{"MT fixed over", r.MT(0.005, 1), 0},
	}
	for _, c := range cases {
		if !near(c.got, c.want) {
			t.Errorf("%s: got %v want %v", c.name, c.got, c.want)
		}
	}
	if got := r.DecodeRequestLimit(300); got != 3 {
		t.Errorf("DecodeRequestLimit(300) = %d, want 3", got)
	}
	if _, ok := r.CachedPrefillTime(10, 10); ok {
		t.Error("CachedPrefillTime without a warm fit must be undefined")
	}
	if v, ok := r.CachedPrefillTime(0, 200); !ok || !near(v, r.PrefillTime(200)) {
		t.Errorf("CachedPrefillTime(0, 200) = %v %v", v, ok)
	}
	if rps := r.DecodeRPS(0.05, 100, 10, 1); rps <= 0 {
		t.Errorf("DecodeRPS = %v, want > 0", rps)
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "profiles.json")
	s, err := Parse([]byte(doc(baseRow + `,"kv_capacity_tokens":2000`)))
	if err != nil {
		t.Fatal(err)
	}
	if err := Save(p, s); err != nil {
		t.Fatal(err)
	}
	got, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := got.Get("e0"); r.KVCapacityTokens == nil || *r.KVCapacityTokens != 2000 || r.TPOTRequestSlope != nil {
		t.Fatalf("round trip lost fields: %+v", r)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temp files left behind: %v", ents)
	}
	if err := got.Cover([]string{"e0"}); err != nil {
		t.Fatal(err)
	}
	if err := got.Cover([]string{"e0", "e1"}); err == nil || !strings.Contains(err.Error(), "profile e1: missing") {
		t.Fatalf("Cover: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "nope.json")); err == nil || !strings.Contains(err.Error(), "nope.json") {
		t.Fatalf("Load missing: %v", err)
	}
}

func TestExampleStoreLoads(t *testing.T) {
	s, err := Load("../../examples/profiles.example.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Profiles) == 0 {
		t.Fatal("example store is empty")
	}
}

// The warm price outside the measured domain follows the bounded rule:
// only with most of the prompt cached, never below the fit inside the
// domain's nearest edge, never above cold, and cold past the bounds.
func TestWarmPrefillTimeBoundedExtrapolation(t *testing.T) {
	a, b, c, d := 1e-9, 1e-5, 0.01, 2e-6
	minP, maxP, minS, maxS := 512, 2048, 64, 1024
	r := Row{IID: "p0", TTFTA: 1e-8, TTFTB: 1e-4, TTFTC: 0.01, CachedTTFTA: &a, CachedTTFTB: &b, CachedTTFTC: &c, CachedTTFTD: &d,
		CachedMinPrefixTokens: &minP, CachedMaxPrefixTokens: &maxP, CachedMinSuffixTokens: &minS, CachedMaxSuffixTokens: &maxS}
	fitAt := func(p, s int) float64 { v, _ := r.CachedPrefillTime(p, s); return v }
	cases := []struct {
		name       string
		p, s       int
		ok, extrap bool
		want       float64 // 0: only the bounds are checked
	}{
		{"inside the domain: the fit", 1024, 128, true, false, fitAt(1024, 128)},
		{"a follow-up's short suffix: priced as the shortest measured", 1700, 20, true, true, fitAt(1700, 64)},
		{"a prefix past the longest measured, within twice it", 3600, 30, true, true, 0},
		{"a prefix past twice the longest: cold", 4200, 30, false, false, 0},
		{"a suffix past the longest measured: cold", 2000, 1500, false, false, 0},
		{"most of the prompt not cached: cold", 300, 900, false, false, 0},
		{"a short prefix, most of the prompt: priced as the shortest prefix", 100, 20, true, true, fitAt(512, 64)},
	}
	for _, tc := range cases {
		v, extrap, ok := r.WarmPrefillTime(tc.p, tc.s)
		if ok != tc.ok || extrap != tc.extrap {
			t.Errorf("%s: ok %v extrapolated %v, want %v %v", tc.name, ok, extrap, tc.ok, tc.extrap)
			continue
		}
		if !ok {
			continue
		}
		if tc.want != 0 && math.Abs(v-min(tc.want, r.PrefillTime(tc.p+tc.s))) > 1e-12 {
			t.Errorf("%s: %v, want %v", tc.name, v, tc.want)
		}
		if v > r.PrefillTime(tc.p+tc.s)+1e-12 {
			t.Errorf("%s: warm %v above cold %v", tc.name, v, r.PrefillTime(tc.p+tc.s))
		}
	}
}

package diagnose

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/diagnose/plan"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// rtFailLog is vLLM 0.11's V1 failure: one 131072-token request needs
// 16.0 GiB of KV cache, 12.35 GiB are available.
const rtFailLog = `(APIServer pid=11) INFO 09-12 10:00:00 [api_server.py:1885] vLLM API server version 0.11.0
(EngineCore_DP0 pid=12) INFO 09-12 10:00:05 [gpu_model_runner.py:2602] Model loading took 14.99 GiB memory and 4.200000 seconds
(EngineCore_DP0 pid=12) INFO 09-12 10:00:09 [gpu_worker.py:298] Available KV cache memory: 12.35 GiB
(EngineCore_DP0 pid=12) ERROR 09-12 10:00:09 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=12) ERROR 09-12 10:00:09 [core.py:708] Traceback (most recent call last):
(EngineCore_DP0 pid=12) ERROR 09-12 10:00:09 [core.py:708]   File "/usr/local/lib/python3.12/site-packages/vllm/v1/core/kv_cache_utils.py", line 879, in check_enough_kv_cache_memory
(EngineCore_DP0 pid=12) ERROR 09-12 10:00:09 [core.py:708]     raise ValueError(
(EngineCore_DP0 pid=12) ERROR 09-12 10:00:09 [core.py:708] ValueError: To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is needed, which is larger than the available KV cache memory (12.35 GiB). Based on the available memory, the estimated maximum model length is 101120. Try increasing ` + "`gpu_memory_utilization`" + ` (which also controls CPU memory on the CPU backend) or decreasing ` + "`max_model_len`" + ` when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
`

// rtBootLog is a healthy start of vLLM minor serving maxLen with a KV
// cache of kv tokens.
func rtBootLog(minor string, maxLen, kv int64) string {
	return fmt.Sprintf(`(APIServer pid=21) INFO 09-12 11:00:00 [api_server.py:1885] vLLM API server version %s.0
(EngineCore_DP0 pid=22) INFO 09-12 11:00:05 [gpu_model_runner.py:2602] Model loading took 14.99 GiB memory and 4.200000 seconds
(EngineCore_DP0 pid=22) INFO 09-12 11:00:09 [gpu_worker.py:298] Available KV cache memory: 12.35 GiB
(EngineCore_DP0 pid=22) INFO 09-12 11:00:09 [kv_cache_utils.py:1087] GPU KV cache size: %s tokens
(EngineCore_DP0 pid=22) INFO 09-12 11:00:09 [kv_cache_utils.py:1091] Maximum concurrency for %s tokens per request: %.2fx
(EngineCore_DP0 pid=22) INFO 09-12 11:00:21 [core.py:211] init engine (profile, create kv cache, warmup model) took 12.34 s
(APIServer pid=21) INFO 09-12 11:00:22 [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8000
`, minor, rtThousands(kv), rtThousands(maxLen), float64(kv)/float64(maxLen))
}

func rtThousands(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// rtFleet is the accepted request: an SLO, the fleet's model, a bfloat16
// / auto contract.
func rtFleet() *fleet.Config {
	return &fleet.Config{Model: "org/model-7b", SLO: fleet.SLO{TTFT: 2, TPOT: 0.05},
		Engines:        []fleet.Engine{{IID: "e0", URL: "http://127.0.0.1:8100"}},
		EngineContract: &fleet.EngineContract{VLLMVersion: "0.11.0", ModelDtype: "bfloat16", KVCacheDtype: "auto"}}
}

type rtWorld struct {
	clock *ports.Fake
	ids   ports.IDGenerator
	st    *store.Store
}

func newWorld(t *testing.T) *rtWorld {
	return &rtWorld{clock: ports.NewFake(time.Date(2026, 9, 12, 10, 0, 0, 0, time.UTC)), ids: ports.Sequential("app"), st: store.Open(t.TempDir())}
}

// diagnose runs the diagnose flow on a log: scan, remedy, one application
// record per correction, stored.
func (w *rtWorld) diagnose(t *testing.T, log string, need int64) ([]Application, []string) {
	t.Helper()
	cfg := rtFleet()
	d, err := Diagnose(strings.NewReader(log), Options{GPU: "h100-sxm"})
	if err != nil {
		t.Fatal(err)
	}
	base, err := plan.FromFleet(cfg, "e0")
	if err != nil {
		t.Fatal(err)
	}
	req := FleetRequirements(cfg, need)
	rem, err := Remediate(d, Input{Plan: &base, GPU: rtGPU(t, "h100-sxm"), Requirements: req})
	if err != nil {
		t.Fatal(err)
	}
	apps, recs, err := Applications(d, rem, req, w.ids, w.clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ds []string
	for _, r := range recs {
		dg, err := w.st.PutRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, dg)
	}
	return apps, ds
}

// prove proves the application in record digest with a boot log and
// stores what the proof wrote.
func (w *rtWorld) prove(t *testing.T, digest, log string) Proof {
	t.Helper()
	w.clock.Advance(time.Hour)
	rec, d, err := FindApplication(w.st, digest)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := Prove(ProofInput{Application: rec, ApplicationDigest: d, BootLog: strings.NewReader(log), Options: Options{GPU: "h100-sxm"}}, w.clock)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []evidence.Record{pf.BootRecord, pf.ApplicationRecord} {
		if _, err := w.st.PutRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	if pf.Promotion != nil {
		if _, err := w.st.PutRecord(*pf.Promotion); err != nil {
			t.Fatal(err)
		}
	}
	return pf
}

func appSummary(apps []Application) []string {
	var out []string
	for _, a := range apps {
		var parts []string
		for _, c := range a.PlanDiff {
			parts = append(parts, c.Field.Path()+"="+c.To.String())
		}
		out = append(out, strings.Join(parts, ",")+":"+string(a.RequestOutcome))
	}
	return out
}

func TestDeriveTruthTable(t *testing.T) {
	want := map[[2]string]Result{
		{"verified", "satisfied"}: ResultFixed, {"verified", "violated"}: ResultAlternative,
		{"verified", "not_evaluated"}: ResultUnverified,
		{"failed", "satisfied"}:       ResultUnverified, {"failed", "violated"}: ResultUnverified, {"failed", "not_evaluated"}: ResultUnverified,
		{"not_evaluated", "satisfied"}: ResultUnverified, {"not_evaluated", "violated"}: ResultUnverified, {"not_evaluated", "not_evaluated"}: ResultUnverified,
	}
	for _, m := range []Mechanism{MechanismVerified, MechanismFailed, MechanismNotEvaluated} {
		for _, r := range []RequestOutcome{RequestSatisfied, RequestViolated, RequestNotEvaluated} {
			if got := Derive(m, r); got != want[[2]string{string(m), string(r)}] {
				t.Errorf("Derive(%s, %s) = %s", m, r, got)
			}
		}
	}
}

// TestResultNotStored: the application schema has no result field, and a
// stored application that carries one does not decode.
func TestResultNotStored(t *testing.T) {
	ty := reflect.TypeFor[Application]()
	for i := 0; i < ty.NumField(); i++ {
		if tag := ty.Field(i).Tag.Get("json"); strings.Contains(tag, "result") || ty.Field(i).Type == reflect.TypeFor[Result]() {
			t.Fatalf("Application.%s stores a result", ty.Field(i).Name)
		}
	}
	w := newWorld(t)
	_, ds := w.diagnose(t, rtFailLog, 0)
	rec, _, err := w.st.Get(ds[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeApplication(rec); err != nil {
		t.Fatalf("a stored application does not decode: %v", err)
	}
	rec.Display[displayApplication].(map[string]any)["result"] = string(ResultFixed)
	if _, err := DecodeApplication(rec); err == nil || !strings.Contains(err.Error(), "result") {
		t.Fatalf("an application with a stored result decoded: %v", err)
	}
}

func TestMechanismNeedsCorrectedBoot(t *testing.T) {
	w := newWorld(t)
	apps, ds := w.diagnose(t, rtFailLog, 65536)
	if got := appSummary(apps); strings.Join(got, "|") != "gpu_memory_utilization=0.95:not_evaluated|max_model_len=101088:not_evaluated|kv_cache_dtype=fp8:violated" {
		t.Fatalf("applications %v", got)
	}
	for _, a := range apps {
		if a.MechanismOutcome != MechanismNotEvaluated || a.Result() != ResultUnverified {
			t.Fatalf("before any boot: %s / %s", a.MechanismOutcome, a.Result())
		}
	}
	for _, tc := range []struct {
		name   string
		app    int
		log    string
		mech   Mechanism
		result Result
		verd   string
	}{
		{"original failure recurs", 0, rtFailLog, MechanismFailed, ResultUnverified, BootFailed},
		{"log cut short", 0, strings.Join(strings.SplitN(rtBootLog("0.11", 131072, 170000), "\n", 3)[:2], "\n"), MechanismNotEvaluated, ResultUnverified, BootIncomplete},
		{"boot of another plan", 1, rtBootLog("0.11", 131072, 170000), MechanismNotEvaluated, ResultUnverified, BootNotOfPlan},
		{"healthy boot of the raised utilization", 0, rtBootLog("0.11", 131072, 170000), MechanismVerified, ResultFixed, BootHealthy},
		{"healthy boot of the shorter context", 1, rtBootLog("0.11", 101088, 101152), MechanismVerified, ResultFixed, BootHealthy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pf := w.prove(t, ds[tc.app], tc.log)
			if pf.Application.MechanismOutcome != tc.mech || pf.Result != tc.result || *pf.BootRecord.Claim.Verdict != tc.verd {
				t.Fatalf("mechanism %s (%s), result %s, boot %s", pf.Application.MechanismOutcome, pf.Application.MechanismReason, pf.Result, *pf.BootRecord.Claim.Verdict)
			}
			if pf.ApplicationRecord.Corrects == nil || *pf.ApplicationRecord.Corrects != ds[tc.app] {
				t.Fatal("the proven application must correct the diagnosed one")
			}
			if len(pf.Application.ProvingRecords) != 1 || pf.Application.ProvingRecords[0] != pf.BootDigest {
				t.Fatalf("proving records %v", pf.Application.ProvingRecords)
			}
			if (pf.Promotion != nil) != (tc.mech == MechanismVerified) {
				t.Fatalf("promotion %v for mechanism %s", pf.Promotion != nil, tc.mech)
			}
		})
	}
}

// TestRequestUsesAcceptedSnapshot: the same corrected boot satisfies the
// request accepted with a 65536-token need and violates one accepted with
// a 131072-token need; the proof reads only the stored snapshot.
func TestRequestUsesAcceptedSnapshot(t *testing.T) {
	w := newWorld(t)
	_, loose := w.diagnose(t, rtFailLog, 65536)
	apps, strict := w.diagnose(t, rtFailLog, 131072)
	if got := appSummary(apps); !strings.Contains(strings.Join(got, "|"), "max_model_len=101088:violated") {
		t.Fatalf("with a 131072 need the shorter context violates up front: %v", got)
	}
	boot := rtBootLog("0.11", 101088, 101152)
	a := w.prove(t, loose[1], boot)
	var b Proof
	for i, app := range apps {
		if app.CorrectedPlan.MaxModelLen == 101088 {
			b = w.prove(t, strict[i], boot)
		}
	}
	if a.Result != ResultFixed || b.Result != ResultAlternative {
		t.Fatalf("loose %s, strict %s", a.Result, b.Result)
	}
	if a.Application.AcceptedRequest.MaxModelLen != 65536 || b.Application.AcceptedRequest.MaxModelLen != 131072 {
		t.Fatal("the proof must keep the accepted snapshot")
	}
}

// TestArtifactSwapViolatesPinnedPolicy: a quantized checkpoint is another
// artifact; against a fleet that pins its model it violates the request
// even when the mechanism works.
func TestArtifactSwapViolatesPinnedPolicy(t *testing.T) {
	req := FleetRequirements(rtFleet(), 0)
	d := Diagnosis{Status: StatusRecognized, Family: FamilyOOMWeightLoad, Fingerprint: Fingerprint{Family: FamilyOOMWeightLoad}, FingerprintDigest: strings.Repeat("1", 4) + strings.Repeat("ab", 32),
		Facts: Facts{ComputeCapability: rtCC(9, 0)}}
	base := plan.Plan{MaxModelLen: 8192}
	rem, err := Remediate(d, Input{Plan: &base, Requirements: req})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t)
	apps, recs, err := Applications(d, rem, req, w.ids, w.clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	var digest string
	for i, a := range apps {
		if a.RequiresArtifact {
			if a.RequestOutcome != RequestViolated || a.ViolatedConstraints[0].Requirement != ReqArtifact {
				t.Fatalf("artifact swap: %s %v", a.RequestOutcome, a.ViolatedConstraints)
			}
			if digest, err = w.st.PutRecord(recs[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	pf := w.prove(t, digest, rtBootLog("0.11", 8192, 170000))
	if pf.Application.MechanismOutcome != MechanismVerified || pf.Result != ResultAlternative {
		t.Fatalf("proven artifact swap: %s / %s", pf.Application.MechanismOutcome, pf.Result)
	}
}

func TestPromotionScopedToEngineMinor(t *testing.T) {
	w := newWorld(t)
	_, ds := w.diagnose(t, rtFailLog, 0)
	rule, _ := RuleFor(FamilyOOMKVCache)
	if s, err := RuleStatusFor(w.st, rule, "0.11"); err != nil || s != RuleHypothesis {
		t.Fatalf("before any proof: %s %v", s, err)
	}
	failed := w.prove(t, ds[0], rtFailLog)
	// A promotion that points at a boot which did not verify promotes nothing.
	forged, _, err := promotion(failed.Application, CorrectedBoot{EngineVersion: &EngineVersion{Major: 0, Minor: 11, Post: -1, Dev: -1}}, failed.BootDigest, w.clock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.PutRecord(forged); err != nil {
		t.Fatal(err)
	}
	if s, _ := RuleStatusFor(w.st, rule, "0.11"); s != RuleHypothesis {
		t.Fatal("a promotion without a verifying corrected boot promoted the rule")
	}
	pf := w.prove(t, ds[0], rtBootLog("0.11", 131072, 170000))
	if pf.Promotion == nil {
		t.Fatal("a verified mechanism with a known engine version must promote")
	}
	for minor, want := range map[string]RuleStatus{"0.11": RuleMechanismVerified, "0.12": RuleHypothesis, "0.10": RuleHypothesis} {
		if s, err := RuleStatusFor(w.st, rule, minor); err != nil || s != want {
			t.Errorf("rule status at %s: %s %v, want %s", minor, s, err, want)
		}
	}
	d, _ := Diagnose(strings.NewReader(rtFailLog), Options{})
	if s, err := RuleStatusOf(w.st, d); err != nil || s != RuleMechanismVerified {
		t.Fatalf("status of the 0.11 diagnosis' rule: %s %v", s, err)
	}
	other, _ := RuleFor(FamilyOOMCUDAGraph)
	if s, _ := RuleStatusFor(w.st, other, "0.11"); s != RuleHypothesis {
		t.Fatal("a proof of one rule promoted another")
	}
	var p RulePromotion
	if err := decodeDisplay(*pf.Promotion, displayPromotion, &p); err != nil || p.Rule.Version != rule.Version+1 || p.Supersedes != rule.Fingerprint() || p.PromotingRecord != pf.BootDigest {
		t.Fatalf("promotion body %+v %v", p, err)
	}
}

// TestPromotedRuleStillUnverifiedForOtherRequest: a rule verified by one
// application's proof leaves every other application an unverified
// suggestion until its own proof runs.
func TestPromotedRuleStillUnverifiedForOtherRequest(t *testing.T) {
	w := newWorld(t)
	_, ds := w.diagnose(t, rtFailLog, 0)
	w.prove(t, ds[0], rtBootLog("0.11", 131072, 170000))
	rule, _ := RuleFor(FamilyOOMKVCache)
	if s, _ := RuleStatusFor(w.st, rule, "0.11"); s != RuleMechanismVerified {
		t.Fatal("setup: the rule is not promoted")
	}
	apps, _ := w.diagnose(t, rtFailLog, 32768)
	for _, a := range apps {
		if a.Result() != ResultUnverified || a.MechanismOutcome != MechanismNotEvaluated || a.Rule.Status != RuleHypothesis {
			t.Fatalf("another request's application: %s / %s / rule %s", a.MechanismOutcome, a.Result(), a.Rule.Status)
		}
	}
}

// TestRecordsByteIdentical: identical inputs, a fake clock and sequential
// ids give byte-identical records, diagnosis and proof alike.
func TestRecordsByteIdentical(t *testing.T) {
	run := func() [][]byte {
		w := newWorld(t)
		_, ds := w.diagnose(t, rtFailLog, 65536)
		pf := w.prove(t, ds[0], rtBootLog("0.11", 131072, 170000))
		var out [][]byte
		for _, d := range append(ds, pf.BootDigest, pf.ApplicationDigest, pf.PromotionDigest) {
			_, b, err := w.st.Get(d)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
		return out
	}
	a, b := run(), run()
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("record %d differs between identical runs:\n%s\n%s", i, a[i], b[i])
		}
	}
}

func TestFindApplication(t *testing.T) {
	w := newWorld(t)
	apps, ds := w.diagnose(t, rtFailLog, 0)
	rec, d, err := FindApplication(w.st, apps[0].ApplicationID)
	if err != nil || d != ds[0] {
		t.Fatalf("by id: %s %v", d, err)
	}
	pf := w.prove(t, ds[0], rtBootLog("0.11", 131072, 170000))
	if _, d, err = FindApplication(w.st, apps[0].ApplicationID); err != nil || d != pf.ApplicationDigest {
		t.Fatalf("by id after the proof, the newest record: %s %v", d, err)
	}
	if _, _, err := FindApplication(w.st, "app-999"); err == nil {
		t.Fatal("an unknown id resolved")
	}
	b, _ := json.Marshal(rec.Subject)
	if !strings.Contains(string(b), `"application":"app-1"`) {
		t.Fatalf("subject %s", b)
	}
}

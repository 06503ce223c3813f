package task

import (
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/ports"

	"github.com/narwhal-go/narwhal/internal/evidence/decision"
)

func TestScore(t *testing.T) {
	obj := &decision.JSONSchema{Type: "object", Required: []string{"answer"},
		Properties: map[string]*decision.JSONSchema{"answer": {Type: "string", Enum: []string{"yes", "no"}}}}
	cases := []struct {
		name      string
		c         decision.Case
		got, want string
		pass      bool
	}{
		{"exact equal", decision.Case{Scorer: decision.ScoreExact}, "Paris", "Paris", true},
		{"exact differs by a space", decision.Case{Scorer: decision.ScoreExact}, " Paris", "Paris", false},
		{"contains", decision.Case{Scorer: decision.ScoreContains}, "It is Paris.", "Paris", true},
		{"regex", decision.Case{Scorer: decision.ScoreRegex}, "answer: 42", `\b42\b`, true},
		{"regex miss", decision.Case{Scorer: decision.ScoreRegex}, "answer: 420", `\b42\b`, false},
		{"schema ok", decision.Case{Scorer: decision.ScoreJSONSchema, Schema: obj}, `{"answer":"yes"}`, "", true},
		{"schema enum", decision.Case{Scorer: decision.ScoreJSONSchema, Schema: obj}, `{"answer":"maybe"}`, "", false},
		{"schema required", decision.Case{Scorer: decision.ScoreJSONSchema, Schema: obj}, `{}`, "", false},
		{"schema not json", decision.Case{Scorer: decision.ScoreJSONSchema, Schema: obj}, `yes`, "", false},
		{"pd equal", decision.Case{Scorer: decision.ScoreEqual}, "a b c", "a b c", true},
		{"pd differs", decision.Case{Scorer: decision.ScoreEqual}, "a b c", "a b d", false},
	}
	for _, c := range cases {
		if pass, why := Score(c.c, c.got, c.want); pass != c.pass {
			t.Errorf("%s: pass %v (%s), want %v", c.name, pass, why, c.pass)
		}
	}
}

func TestShippedSuiteParses(t *testing.T) {
	s, _, err := decision.ParseSuite(PDEquivalence())
	if err != nil || s.Kind != decision.SuitePDEquivalence || s.Model != AnyModel {
		t.Fatalf("shipped suite: %+v %v", s, err)
	}
}

func TestRecordsAgainstFloor(t *testing.T) {
	s := decision.Suite{Name: "s", Kind: decision.SuiteCases, QualityFloor: 0.75}
	outs := []Outcome{{Case: "a", Pass: true}, {Case: "b", Pass: true}, {Case: "c", Pass: false}}
	d := "1220" + "ab00000000000000000000000000000000000000000000000000000000000000"
	eps := []Endpoint{{IID: "e0", Fingerprint: "fp", EngineVersion: "0.21.0", BootRecord: d}}
	r := Records(s, d[:len(d)-2]+"01", d[:len(d)-2]+"02", eps, outs, fixedClock())
	if *r[0].Claim.Verdict != "fail" {
		t.Fatalf("2/3 against a 0.75 floor: verdict %s, want fail", *r[0].Claim.Verdict)
	}
	if _, err := r[0].Digest(); err != nil {
		t.Fatal(err)
	}
}

func fixedClock() ports.Clock { return ports.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) }

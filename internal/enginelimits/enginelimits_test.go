package enginelimits

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/probe"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// report is one engine's answer: iid said n (0: it did not say).
type report struct {
	iid string
	n   int
}

// TestLeast: after each sequence of reports, the smallest positive one
// bounds every leg.
func TestLeast(t *testing.T) {
	sequences := map[string]struct {
		reports []report
		least   int
	}{
		"none reported":                          {nil, 0},
		"one":                                    {[]report{{"a", 4096}}, 4096},
		"the smallest bounds every leg":          {[]report{{"a", 4096}, {"b", 2048}}, 2048},
		"an engine that does not say is ignored": {[]report{{"a", 4096}, {"c", 0}}, 4096},
		"a later report replaces the earlier":    {[]report{{"a", 1024}, {"b", 4096}, {"a", 8192}}, 4096},
		"all stopped saying":                     {[]report{{"a", 1024}, {"a", 0}}, 0},
	}
	for name, seq := range sequences {
		var l Limits
		for _, r := range seq.reports {
			l.Set(r.iid, r.n)
		}
		if got := l.Least(); got != seq.least {
			t.Errorf("%s: Least %d, want %d", name, got, seq.least)
		}
	}
}

func TestNoteReadsTheServedModelsCard(t *testing.T) {
	var l Limits
	l.Note("a", "m", []vllm.ModelCard{{ID: "other", MaxModelLen: 100}, {ID: "m", MaxModelLen: 2048}})
	l.Note("b", "m", []vllm.ModelCard{{ID: "other", MaxModelLen: 50}})
	if got := l.Least(); got != 2048 {
		t.Errorf("Least %d, want 2048 (the served model's card only)", got)
	}
}

// Learn asks every engine; one that does not answer keeps its last length.
func TestLearn(t *testing.T) {
	var l Limits
	l.Set("b", 1024)
	var mu sync.Mutex
	asked := map[string]bool{}
	src := Source{IIDs: []string{"a", "b"}, Model: "m", Log: slog.New(slog.DiscardHandler),
		Ask: func(_ context.Context, iid string) probe.Credential {
			mu.Lock()
			asked[iid] = true
			mu.Unlock()
			if iid == "b" {
				return probe.Credential{Err: &fault.Error{Reason: fault.EngineUnreachable, Msg: "refused"}}
			}
			return probe.Credential{Cards: []vllm.ModelCard{{ID: "m", MaxModelLen: 4096}}}
		}}
	l.Learn(context.Background(), src)
	if !asked["a"] || !asked["b"] {
		t.Errorf("asked %v, want both engines", asked)
	}
	if got := l.Least(); got != 1024 {
		t.Errorf("Least %d, want 1024 (b keeps what it reported)", got)
	}
}

package enginelimits

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/narwhal-go/narwhal/internal/probe"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

func TestLeast(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  [][2]any // iid, n in order
		want int
	}{
		{"none reported", nil, 0},
		{"one", [][2]any{{"a", 4096}}, 4096},
		{"the smallest bounds every leg", [][2]any{{"a", 4096}, {"b", 2048}}, 2048},
		{"an engine that does not say is ignored", [][2]any{{"a", 4096}, {"c", 0}}, 4096},
		{"a later report replaces the earlier", [][2]any{{"a", 1024}, {"b", 4096}, {"a", 8192}}, 4096},
		{"all stopped saying", [][2]any{{"a", 1024}, {"a", 0}}, 0},
	} {
		var l Limits
		for _, s := range tc.set {
			l.Set(s[0].(string), s[1].(int))
		}
		if got := l.Least(); got != tc.want {
			t.Errorf("%s: Least %d, want %d", tc.name, got, tc.want)
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
				return probe.Credential{Err: &vllm.Error{Reason: vllm.ReasonUnreachable, Msg: "refused"}}
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

package evidence

import (
	"time"

	"github.com/narwhal-go/narwhal/internal/ports"
)

var t0 = time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)

func sp(s string) *string   { return &s }
func fp(f float64) *float64 { return &f }
func vp(s string) *Version  { v, _ := ParseVersion(s); return &v }
func vs(ss ...string) []Version {
	out := []Version{}
	for _, s := range ss {
		out = append(out, *vp(s))
	}
	return out
}

// rec builds a valid record; opts adjust it.
func rec(kind Kind, scope ClaimScope, level Level, verdict string, engine string, subject map[string]string, opts ...func(*Record)) Record {
	status := Measured
	if kind == KindPrediction {
		status = Predicted
	}
	r := Stamp(Record{
		Kind: kind, ClaimScope: scope, EpistemicStatus: status, Level: level,
		Subject:    subject,
		Claim:      Claim{Quantity: string(kind), Verdict: sp(verdict)},
		Engine:     Engine{Name: "vllm", Version: engine},
		Provenance: Provenance{Producer: "test", ProducerVersion: "0"},
	}, ports.NewFake(t0))
	for _, o := range opts {
		o(&r)
	}
	return r
}

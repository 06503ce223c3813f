package decision

import (
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/ports"
)

var clock = ports.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))

const rev = "1220" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// stored is the records as a store with their signatures gives them:
// each acceptance signed by a key registered for its own principal (the
// store verifies that; internal/evidence/store tests it).
func stored(t *testing.T, rs ...evidence.Record) []store.Stored {
	t.Helper()
	var out []store.Stored
	for _, r := range rs {
		d, err := r.Digest()
		if err != nil {
			t.Fatal(err)
		}
		s := store.Stored{Digest: d, Record: r}
		if r.Kind == evidence.KindAcceptance {
			s.SignedBy = r.Subject[evidence.SubjectPrincipal]
		}
		out = append(out, s)
	}
	return out
}

// An acceptance the named principal did not sign with a registered key
// counts for nothing, however well-formed.
func TestUnsignedAcceptanceCountsForNothing(t *testing.T) {
	prop := Proposal(KindRequest, rev, principal(t, "ai_agent:planner"), clock)
	a, err := Accept(stored(t, prop), rev, principal(t, "human:alice"), clock)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, signedBy, why string }{
		{"unsigned", "", "unsigned"}, {"signed by another principal's key", "human:bob", "no key registered for human:alice"}} {
		rs := stored(t, prop, a)
		rs[1].SignedBy, rs[1].SignError = c.signedBy, c.why
		why := ValidAcceptance(rs, rs[1])
		if Accepted(rs, rev) || !strings.Contains(why, "counts for nothing") || !strings.Contains(why, c.why) {
			t.Errorf("%s: accepted %v, why %q", c.name, Accepted(rs, rev), why)
		}
	}
}

func principal(t *testing.T, s string) Principal {
	t.Helper()
	p, err := ParsePrincipal(s, "cli")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAcceptanceRules(t *testing.T) {
	prop := Proposal(KindRequest, rev, principal(t, "ai_agent:planner"), clock)
	cases := []struct {
		name, by, wantErr string
	}{
		{"the proposer cannot accept its own proposal", "ai_agent:planner", "cannot accept its own proposal"},
		{"an agent cannot accept", "ai_agent:other", "may not accept"},
		{"a narwhal component (an executor) cannot accept", "narwhal_component:task-run", "may not accept"},
		{"a human accepts", "human:alice", ""},
		{"an authorized system accepts", "authorized_system:ci", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := Accept(stored(t, prop), rev, principal(t, c.by), clock)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.Subject[evidence.SubjectPrincipal] != c.by || a.ObservedAt == "" || a.Display[displayPrincipal] != "cli" {
				t.Fatalf("acceptance does not record principal, source and time: %+v", a)
			}
		})
	}
}

func TestHumanSelfAcceptanceRefused(t *testing.T) {
	prop := Proposal(KindSuite, rev, principal(t, "human:alice"), clock)
	if _, err := Accept(stored(t, prop), rev, principal(t, "human:alice"), clock); err == nil {
		t.Fatal("a principal accepted its own proposal")
	}
}

func TestUnacceptedProposalInert(t *testing.T) {
	rs := stored(t, Proposal(KindRequest, rev, principal(t, "ai_agent:planner"), clock))
	err := RequireAccepted(rs, KindRequest, rev)
	if err == nil || !strings.Contains(err.Error(), rev) || !strings.Contains(err.Error(), "not accepted") {
		t.Fatalf("err %v, want one naming the unaccepted revision", err)
	}
	if err := RequireAccepted(nil, KindRequest, rev); err == nil || !strings.Contains(err.Error(), "never proposed") {
		t.Fatalf("err %v for an unknown revision", err)
	}
}

func TestNewRevisionNeedsNewAcceptance(t *testing.T) {
	prop := Proposal(KindRequest, rev, principal(t, "ai_agent:planner"), clock)
	a, err := Accept(stored(t, prop), rev, principal(t, "human:alice"), clock)
	if err != nil {
		t.Fatal(err)
	}
	other := "1220" + strings.Repeat("11", 32)
	rs := stored(t, prop, a, Proposal(KindRequest, other, principal(t, "ai_agent:planner"), clock))
	if !Accepted(rs, rev) || Accepted(rs, other) {
		t.Fatal("an acceptance carried over to another revision")
	}
}

// A hand-made acceptance record (evidence add) cannot smuggle in what
// Accept refuses.
func TestForgedSelfAcceptanceIgnored(t *testing.T) {
	by := principal(t, "human:alice")
	prop := Proposal(KindRequest, rev, by, clock)
	forged := revisionRecord(evidence.KindAcceptance, claimAcceptance, evidence.VerdictAccepted, KindRequest, rev, by, producerAcceptance, nil, clock)
	rs := stored(t, prop, forged)
	if Accepted(rs, rev) || ValidAcceptance(rs, rs[1]) == "" {
		t.Fatal("a forged self-acceptance counted")
	}
}

func TestParseRequestRejectsTooFewSamples(t *testing.T) {
	raw := `{"schema":"narwhal.decision-request","schema_version":1,"model":"m","objective":"o","slo":{"ttft_s":1,"tpot_s":0.1,"attainment":0.9},
"workload":{"max_input_tokens":10,"max_output_tokens":10,"max_rate_per_s":1,"min_samples":5},"artifact_policy":{"artifact":""}}`
	if _, _, err := ParseRequest([]byte(raw)); err == nil || !strings.Contains(err.Error(), "min_samples") {
		t.Fatalf("err %v, want the minimum sample floor", err)
	}
}

package decision

import (
	"fmt"
	"sort"
	"strings"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/version"
)

// Principal kinds (reference/evidence.md §2.14). Only humans and
// authorized systems may accept.
const (
	PrincipalHuman      = "human"
	PrincipalSystem     = "authorized_system"
	PrincipalAgent      = "ai_agent"
	PrincipalComponent  = "narwhal_component"
	claimProposal       = "proposal"
	claimAcceptance     = "acceptance"
	producerProposal    = "narwhal evidence propose"
	producerAcceptance  = "narwhal evidence accept"
	displayPrincipal    = "principal_source"
	displayProposalFrom = "proposal_record"
)

// Principal is who proposes or accepts, written "kind:id".
type Principal struct {
	Kind, ID, Source string
}

// ParsePrincipal reads "kind:id" (for example "human:alice").
func ParsePrincipal(s, source string) (Principal, error) {
	kind, id, ok := strings.Cut(s, ":")
	switch {
	case !ok || id == "":
		return Principal{}, fmt.Errorf("principal %q: write kind:id, for example human:alice or ai_agent:planner", s)
	case kind != PrincipalHuman && kind != PrincipalSystem && kind != PrincipalAgent && kind != PrincipalComponent:
		return Principal{}, fmt.Errorf("principal %q: kind must be human, authorized_system, ai_agent or narwhal_component", s)
	}
	if source == "" {
		source = "cli"
	}
	return Principal{Kind: kind, ID: id, Source: source}, nil
}

func (p Principal) String() string { return p.Kind + ":" + p.ID }

// Proposal is a proposal record for a document's revision.
func Proposal(kind RevisionKind, revision string, by Principal, clock ports.Clock) evidence.Record {
	return revisionRecord(evidence.KindProposal, claimProposal, evidence.VerdictProposed, kind, revision, by, producerProposal, nil, clock)
}

func revisionRecord(k evidence.Kind, quantity, verdict string, kind RevisionKind, revision string, by Principal, producer string, inputs []string, clock ports.Clock) evidence.Record {
	subject := map[string]string{evidence.SubjectRevisionKind: string(kind), evidence.SubjectRevision: revision, evidence.SubjectPrincipal: by.String()}
	if kind == KindRequest {
		subject[evidence.SubjectApplication] = revision
	} else {
		subject[evidence.SubjectTaskSuite] = revision
	}
	r := evidence.Record{Kind: k, ClaimScope: evidence.ScopeConfig, EpistemicStatus: evidence.Derived, Level: evidence.MaintainerLabMeasured,
		Subject: subject, Claim: evidence.Claim{Quantity: quantity, Verdict: &verdict},
		Engine:     evidence.Engine{Name: "none", Version: "", Packages: []string{}},
		Provenance: evidence.Provenance{Producer: producer, ProducerVersion: version.Version, Inputs: append([]string{revision}, inputs...)},
		Display:    map[string]any{displayPrincipal: by.Source}}
	return evidence.Stamp(r, clock)
}

// Accept checks that by may accept revision and returns the acceptance
// record. It refuses a revision nobody proposed, a principal that may not
// accept, and any principal accepting its own proposal.
func Accept(records []store.Stored, revision string, by Principal, clock ports.Clock) (evidence.Record, error) {
	props := proposalsOf(records, revision)
	if len(props) == 0 {
		return evidence.Record{}, fmt.Errorf("revision %s was never proposed: run 'narwhal evidence propose FILE' first", revision)
	}
	for _, p := range props {
		if p.Record.Subject[evidence.SubjectPrincipal] == by.String() {
			return evidence.Record{}, fmt.Errorf("principal %s proposed revision %s and cannot accept its own proposal: another human or authorized system must accept it", by, revision)
		}
	}
	if by.Kind != PrincipalHuman && by.Kind != PrincipalSystem {
		return evidence.Record{}, fmt.Errorf("principal %s may not accept: only a human or an authorized_system accepts a revision", by)
	}
	kind := RevisionKind(props[0].Record.Subject[evidence.SubjectRevisionKind])
	return revisionRecord(evidence.KindAcceptance, claimAcceptance, evidence.VerdictAccepted, kind, revision, by, producerAcceptance, []string{props[0].Digest}, clock), nil
}

func proposalsOf(records []store.Stored, revision string) []store.Stored {
	var out []store.Stored
	for _, s := range records {
		if s.Record.Kind == evidence.KindProposal && s.Record.Subject[evidence.SubjectRevision] == revision {
			out = append(out, s)
		}
	}
	return out
}

// ValidAcceptance re-checks a stored acceptance against the proposals and
// its signature: a record added by hand cannot smuggle in a
// self-acceptance or an acceptance by an agent, and an acceptance counts
// only when the principal it names signed it with a key registered for
// that principal (store.Stored.SignedBy). It returns why not, "" when
// valid.
func ValidAcceptance(records []store.Stored, s store.Stored) string {
	a := s.Record
	rev := a.Subject[evidence.SubjectRevision]
	by := a.Subject[evidence.SubjectPrincipal]
	if s.SignedBy != by {
		return fmt.Sprintf("acceptance of %s by %s is not signed by a key registered for %s (%s): it counts for nothing; register the key with 'narwhal evidence keys add --principal %s KEY.pub' and accept with 'narwhal evidence accept --key KEY'",
			short(rev), by, by, s.SignError, by)
	}
	props := proposalsOf(records, rev)
	if len(props) == 0 {
		return fmt.Sprintf("acceptance of %s names no proposal", short(rev))
	}
	if k, _, _ := strings.Cut(by, ":"); k != PrincipalHuman && k != PrincipalSystem {
		return fmt.Sprintf("acceptance of %s by %s: only a human or an authorized_system accepts", short(rev), by)
	}
	for _, p := range props {
		if p.Record.Subject[evidence.SubjectPrincipal] == by {
			return fmt.Sprintf("acceptance of %s by %s is a self-acceptance: refused", short(rev), by)
		}
	}
	return ""
}

// Accepted reports whether revision has a valid acceptance.
func Accepted(records []store.Stored, revision string) bool {
	for _, s := range records {
		if s.Record.Kind == evidence.KindAcceptance && s.Record.Subject[evidence.SubjectRevision] == revision && ValidAcceptance(records, s) == "" {
			return true
		}
	}
	return false
}

// RequireAccepted is the gate every consumer passes: an unaccepted
// revision drives nothing, and the error names it.
func RequireAccepted(records []store.Stored, kind RevisionKind, revision string) error {
	if Accepted(records, revision) {
		return nil
	}
	if len(proposalsOf(records, revision)) == 0 {
		return fmt.Errorf("%s %s was never proposed: run 'narwhal evidence propose FILE', then have another principal accept it", kind, revision)
	}
	return fmt.Errorf("%s %s is proposed but not accepted: nothing consumes an unaccepted revision; run 'narwhal evidence accept %s --principal human:<you>'", kind, revision, revision)
}

// AcceptedRequests lists the accepted DecisionRequest revisions for
// model, newest acceptance first (then by digest).
func AcceptedRequests(st *store.Store, records []store.Stored, model string) []string {
	type acc struct{ at, rev string }
	var accs []acc
	seen := map[string]bool{}
	for _, s := range records {
		r := s.Record
		rev := r.Subject[evidence.SubjectRevision]
		if r.Kind != evidence.KindAcceptance || r.Subject[evidence.SubjectRevisionKind] != string(KindRequest) || seen[rev] || ValidAcceptance(records, s) != "" {
			continue
		}
		if req, err := LoadRequest(st, rev); err == nil && req.Model == model {
			seen[rev] = true
			accs = append(accs, acc{r.ObservedAt, rev})
		}
	}
	sort.Slice(accs, func(i, j int) bool {
		if accs[i].at != accs[j].at {
			return accs[i].at > accs[j].at
		}
		return accs[i].rev < accs[j].rev
	})
	out := make([]string, len(accs))
	for i, a := range accs {
		out[i] = a.rev
	}
	return out
}

// LoadRequest reads a stored DecisionRequest revision.
func LoadRequest(st *store.Store, rev string) (Request, error) { return load(st, rev, ParseRequest) }

// LoadSuite reads a stored task suite revision.
func LoadSuite(st *store.Store, rev string) (Suite, error) { return load(st, rev, ParseSuite) }

func load[T any](st *store.Store, rev string, parse func([]byte) (T, []byte, error)) (T, error) {
	b, err := st.GetDocument(rev)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("revision %s: %w", rev, err)
	}
	v, _, err := parse(b)
	return v, err
}

func short(d string) string {
	if len(d) > 16 {
		return d[:16]
	}
	return d
}

// ChooseRequest is the DecisionRequest a consumer judges against: the
// given revision when it is accepted, else the newest accepted one for
// model. An unaccepted or missing revision is an error naming it.
func ChooseRequest(st *store.Store, records []store.Stored, model, given string) (string, error) {
	if given != "" {
		return given, RequireAccepted(records, KindRequest, given)
	}
	acc := AcceptedRequests(st, records, model)
	if len(acc) == 0 {
		return "", fmt.Errorf("no accepted DecisionRequest for model %s: propose one (narwhal evidence propose FILE) and have another principal accept it", model)
	}
	return acc[0], nil
}

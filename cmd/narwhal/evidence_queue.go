package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/cmdresult"
	"github.com/narwhal-go/narwhal/internal/diagnose"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/decision"
	"github.com/narwhal-go/narwhal/internal/evidence/queue"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/evidence/vllmrel"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// queueInputSchema names the candidates file `narwhal evidence queue` reads.
const queueInputSchema = "narwhal.evidence.queue-input"

type queueInput struct {
	Schema         string            `json:"schema"`
	SchemaVersion  int               `json:"schema_version"`
	EngineReleases []string          `json:"engine_releases"` // for freshness; absent fails closed (stale)
	Candidates     []queue.Candidate `json:"candidates"`
}

func evQueueCmd(dir *string) *cobra.Command {
	var candidates, format string
	c := &cobra.Command{
		Use:   "queue [--candidates FILE] [--format text|json]",
		Short: "Order what to measure next by evidence gap, each item explained",
		Long: `Build the day-one measurement queue. Every failure record in the store
(a locally observed failed plan) enters directly; so does every accepted
DecisionRequest in the store (by the artifact its policy names, else by the
request itself). --candidates optionally adds signal candidates and
engine_releases. Signal candidates (attributed, dated) are merged by
resolved artifact identity, else lineage fingerprint, and are queued only
when corroborated: two independent origins, or one that is not a
popularity counter. Hugging Face 30-day downloads are one labelled signal
at most and never decide eligibility or order.

Order: evidence gap (missing, contested, stale, covered — judged against
the store's measured records, its release index and advisories, and any
engine_releases in --candidates),
then unresolved failures, uncertainty, signal breadth, fingerprint.

Exit codes: 0 the queue was printed, 1 the store could not be read, 2 bad
input.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.CheckFormat(format); err != nil {
				return err
			}
			in, err := readQueueInput(candidates)
			if err != nil {
				return err
			}
			q, held, err := buildQueue(store.Open(*dir), in)
			if err != nil {
				return err
			}
			if format == "json" {
				r := cmdresult.Result{Command: "narwhal evidence queue", Operation: "queue", Status: cmdresult.Success,
					Data: map[string]any{"queued": nonNilItems(q), "held": nonNilItems(held)}}
				return r.Write(cmd.OutOrStdout(), nil)
			}
			writeQueueText(cmd.OutOrStdout(), q, held)
			return nil
		},
	}
	c.Flags().StringVar(&candidates, "candidates", "", "a "+queueInputSchema+" file: accepted requests, signal candidates, engine_releases")
	cli.FormatFlag(c.Flags(), &format)
	return c
}

func readQueueInput(path string) (queueInput, error) {
	in := queueInput{Schema: queueInputSchema, SchemaVersion: 1}
	if path == "" {
		return in, nil
	}
	raw, err := readInput(path)
	if err != nil {
		return in, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, cli.Invalid(fmt.Errorf("%s: %w", path, err))
	}
	if in.Schema != queueInputSchema || in.SchemaVersion != 1 {
		return in, cli.Invalid(fmt.Errorf("%s: schema %q v%d: want %s v1", path, in.Schema, in.SchemaVersion, queueInputSchema))
	}
	return in, nil
}

// buildQueue builds the queue from the store: every accepted
// DecisionRequest and every failed plan enters directly, each gap is
// judged against the store's records, its release index and advisories;
// the --candidates file only adds signal candidates and releases.
func buildQueue(st *store.Store, in queueInput) ([]queue.Item, []queue.Item, error) {
	stored, err := st.Records()
	if err != nil {
		return nil, nil, cli.Failed(err)
	}
	recs := make([]evidence.Record, len(stored))
	for i := range stored {
		recs[i] = stored[i].Record
	}
	fresh, err := queueFreshness(st, in)
	if err != nil {
		return nil, nil, err
	}
	ev := queue.Evidence{Records: recs, ResolvedFailures: map[string]bool{}, Freshness: fresh}
	cands := append(append([]queue.Candidate{}, in.Candidates...), acceptedRequests(st, stored)...)
	// A Fixed remediation (mechanism verified, request satisfied) resolves its failure.
	fixed := fmt.Sprintf("mechanism=%s,request=%s", diagnose.MechanismVerified, diagnose.RequestSatisfied)
	for _, s := range stored {
		r := s.Record
		switch {
		case r.Claim.Quantity == diagnose.QuantityFailure:
			fp := r.Subject[diagnose.SubjectFailure]
			cands = append(cands, queue.Candidate{Source: queue.LocalFailedPlan, Name: "failed plan " + shortDigest(r.Subject[evidence.SubjectSolution]),
				Solution: r.Subject[evidence.SubjectSolution], ClaimScope: evidence.ScopeBoot, Reference: s.Digest, Failures: []string{fp}})
		case r.Claim.Quantity == diagnose.QuantityRemediation && r.Claim.Verdict != nil && *r.Claim.Verdict == fixed:
			ev.ResolvedFailures[r.Subject[diagnose.SubjectFailure]] = true
		}
	}
	q, held, err := queue.Build(cands, ev)
	if err != nil {
		return nil, nil, cli.Invalid(err)
	}
	return q, held, nil
}

// queueFreshness is the freshness snapshot: now, the store's release
// index (imported, else shipped) with the file's engine_releases added,
// and the store's advisories.
func queueFreshness(st *store.Store, in queueInput) (evidence.FreshnessInput, error) {
	now := ports.SystemClock().Now()
	raw, err := st.ReadReleaseIndex()
	if err != nil {
		return evidence.FreshnessInput{}, cli.Failed(err)
	}
	ix, err := vllmrel.Load(raw)
	if err != nil {
		return evidence.FreshnessInput{}, cli.Failed(err)
	}
	advs, err := st.Advisories()
	if err != nil {
		return evidence.FreshnessInput{}, cli.Failed(err)
	}
	f := evidence.FreshnessInput{Now: now, Releases: ix.AsOf(now), Advisories: advs}
	for _, s := range in.EngineReleases {
		v, err := evidence.ParseVersion(s)
		if err != nil {
			return f, cli.Invalid(fmt.Errorf("engine_releases: %w", err))
		}
		f.Releases = append(f.Releases, v)
	}
	return f, nil
}

// acceptedRequests are the store's validly accepted DecisionRequests as
// direct entries: by the artifact their policy names, else by the
// request itself (any resolved identity may serve it).
func acceptedRequests(st *store.Store, stored []store.Stored) []queue.Candidate {
	var out []queue.Candidate
	seen := map[string]bool{}
	for _, s := range stored {
		r := s.Record
		rev := r.Subject[evidence.SubjectRevision]
		if r.Kind != evidence.KindAcceptance || r.Subject[evidence.SubjectRevisionKind] != string(decision.KindRequest) || seen[rev] ||
			decision.ValidAcceptance(stored, s) != "" {
			continue
		}
		req, err := decision.LoadRequest(st, rev)
		if err != nil {
			continue
		}
		seen[rev] = true
		c := queue.Candidate{Source: queue.AcceptedRequest, Name: "accepted request " + shortDigest(rev) + " (" + req.Model + ")",
			Artifact: req.ArtifactPolicy.Artifact, ClaimScope: evidence.ScopeServingPerformance, Reference: s.Digest}
		if c.Artifact == "" {
			c.Solution = "request:" + rev
		}
		out = append(out, c)
	}
	return out
}

func shortDigest(d string) string {
	if len(d) > 16 {
		return d[:16] + "…"
	}
	return d
}

func nonNilItems(s []queue.Item) []queue.Item {
	if s == nil {
		return []queue.Item{}
	}
	return s
}

func writeQueueText(w io.Writer, q, held []queue.Item) {
	if len(q) == 0 {
		fmt.Fprintln(w, "queue: empty (no failed plans in the store, no eligible candidates)")
	}
	for _, it := range q {
		fmt.Fprintf(w, "%2d  %-9s  %s  %v\n", it.Position, it.Gap, shortDigest(it.DedupKey), it.Names)
		for _, why := range it.Why {
			fmt.Fprintf(w, "      %s\n", why)
		}
		if it.AheadBy != "" {
			fmt.Fprintf(w, "      ahead of #%d by %s\n", it.Position+1, it.AheadBy)
		}
	}
	for _, it := range held {
		fmt.Fprintf(w, "held  %s  %v: %s\n", shortDigest(it.DedupKey), it.Names, it.Why[1])
	}
}

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/evidence/decision"
	"github.com/narwhal-go/narwhal/internal/evidence/task"
)

type proposeFlags struct {
	principal, source, cases, builtin string
}

func evProposeCmd(f *evFlags) *cobra.Command {
	p := &proposeFlags{}
	c := &cobra.Command{
		Use:   "propose [FILE]",
		Short: "Propose a DecisionRequest or task suite revision: store it by digest; it drives nothing until another principal accepts it",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if p.principal == "" {
				return cli.Usage("--principal is required (kind:id, for example ai_agent:planner or human:alice)")
			}
			by, err := decision.ParsePrincipal(p.principal, p.source)
			if err != nil {
				return cli.Invalid(err)
			}
			raw, err := proposalInput(args, p)
			if err != nil {
				return err
			}
			return propose(cmd, f, raw, by)
		},
	}
	fl := c.Flags()
	fl.StringVar(&p.principal, "principal", "", "who proposes, kind:id (human, authorized_system, ai_agent, narwhal_component)")
	fl.StringVar(&p.source, "source", "cli", "where the proposal came from (cli, api, ci, mcp)")
	fl.StringVar(&p.cases, "cases", "", "a JSONL file of task cases to embed in the suite (one case per line)")
	fl.StringVar(&p.builtin, "builtin", "", "propose a shipped suite instead of FILE: pd-equivalence")
	return c
}

// proposalInput is the document's bytes: FILE, or a shipped suite, with
// --cases embedded so the revision is immutable.
func proposalInput(args []string, p *proposeFlags) ([]byte, error) {
	var raw []byte
	var err error
	switch {
	case p.builtin == "pd-equivalence" && len(args) == 0:
		raw = task.PDEquivalence()
	case p.builtin != "":
		return nil, cli.Usage("--builtin %q: the shipped suite is pd-equivalence, and it takes no FILE", p.builtin)
	case len(args) == 1:
		if raw, err = readInput(args[0]); err != nil {
			return nil, err
		}
	default:
		return nil, cli.Usage("name the document to propose: FILE, or --builtin pd-equivalence")
	}
	if p.cases == "" {
		return raw, nil
	}
	return embedCases(raw, p.cases)
}

func embedCases(raw []byte, path string) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, cli.Invalid(fmt.Errorf("suite: %w", err))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, cli.Invalid(fmt.Errorf("--cases: %w", err))
	}
	cases := []any{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var c any
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, cli.Invalid(fmt.Errorf("--cases %s:%d: %w", path, n, err))
		}
		cases = append(cases, c)
	}
	doc["cases"] = cases
	return json.Marshal(doc)
}

// propose validates, stores the canonical revision and its proposal record.
func propose(cmd *cobra.Command, f *evFlags, raw []byte, by decision.Principal) error {
	kind, err := decision.KindOf(raw)
	if err != nil {
		return cli.Invalid(err)
	}
	var b []byte
	if kind == decision.KindRequest {
		_, b, err = decision.ParseRequest(raw)
	} else {
		_, b, err = decision.ParseSuite(raw)
	}
	if err != nil {
		return cli.Invalid(err)
	}
	st := f.open()
	rev, err := st.PutDocument(b)
	if err != nil {
		return cli.Failed(err)
	}
	rd, err := st.PutRecord(decision.Proposal(kind, rev, by, f.clock()))
	if err != nil {
		return cli.Failed(err)
	}
	data := map[string]any{"revision": rev, "kind": kind, "proposal_record": rd, "proposed_by": by.String(), "accepted": false}
	return f.emit(cmd, "propose", data, func(w io.Writer) {
		fmt.Fprintf(w, "proposed %s %s by %s (record %s)\nit drives nothing until accepted: narwhal evidence accept %s --principal human:<you>\n",
			kind, rev, by, rd, rev)
	})
}

func evAcceptCmd(f *evFlags) *cobra.Command {
	var principal, source string
	c := &cobra.Command{
		Use:   "accept REVISION --principal P",
		Short: "Accept a proposed revision by digest; the proposer cannot accept its own proposal",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !canon.IsDigest(args[0]) {
				return cli.Invalid(fmt.Errorf("revision %q is not a 1220… digest: pass the digest narwhal evidence propose printed", args[0]))
			}
			by, err := decision.ParsePrincipal(principal, source)
			if err != nil {
				return cli.Invalid(err)
			}
			rs, err := f.records()
			if err != nil {
				return err
			}
			rec, err := decision.Accept(rs, args[0], by, f.clock())
			if err != nil {
				return cli.Failed(err)
			}
			d, err := f.open().PutRecord(rec)
			if err != nil {
				return cli.Failed(err)
			}
			data := map[string]any{"revision": args[0], "acceptance_record": d, "accepted_by": by.String(), "source": by.Source, "accepted_at": rec.ObservedAt}
			return f.emit(cmd, "accept", data, func(w io.Writer) {
				fmt.Fprintf(w, "accepted %s by %s via %s at %s (record %s)\n", args[0], by, by.Source, rec.ObservedAt, d)
			})
		},
	}
	c.Flags().StringVar(&principal, "principal", "", "who accepts, kind:id (human or authorized_system)")
	c.Flags().StringVar(&source, "source", "cli", "where the acceptance came from (cli, api, ci)")
	return c
}

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/evidence/decision"
	"github.com/narwhal-go/narwhal/internal/evidence/osv"
	"github.com/narwhal-go/narwhal/internal/evidence/sign"
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
	var principal, source, keyPath string
	c := &cobra.Command{
		Use:   "accept REVISION --principal P --key KEY",
		Short: "Accept a proposed revision by digest, signed with a key registered for the principal; the proposer cannot accept its own proposal",
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
			key, err := acceptKey(f, keyPath, by)
			if err != nil {
				return err
			}
			st := f.open()
			d, err := st.PutRecord(rec)
			if err == nil {
				err = st.Sign(d, key)
			}
			if err != nil {
				return cli.Failed(err)
			}
			data := map[string]any{"revision": args[0], "acceptance_record": d, "accepted_by": by.String(), "source": by.Source,
				"accepted_at": rec.ObservedAt, "key_id": key.Public.ID()}
			return f.emit(cmd, "accept", data, func(w io.Writer) {
				fmt.Fprintf(w, "accepted %s by %s via %s at %s (record %s, signed with key %s)\n", args[0], by, by.Source, rec.ObservedAt, d, key.Public.ID())
			})
		},
	}
	c.Flags().StringVar(&principal, "principal", "", "who accepts, kind:id (human or authorized_system)")
	c.Flags().StringVar(&source, "source", "cli", "where the acceptance came from (cli, api, ci)")
	c.Flags().StringVar(&keyPath, "key", "", "the principal's private key (narwhal evidence keygen), whose public key is registered with narwhal evidence keys add")
	return c
}

// acceptKey reads the private key an acceptance is signed with and checks
// its public key is registered for by: an acceptance signed otherwise
// would count for nothing, so it is refused before anything is written.
func acceptKey(f *evFlags, path string, by decision.Principal) (sign.Key, error) {
	if path == "" {
		return sign.Key{}, cli.Usage("accept: --key is required: an acceptance counts only when signed by a key registered for %s (narwhal evidence keygen --out K; narwhal evidence keys add --principal %s K.pub)", by, by)
	}
	key, err := readParsed(path, sign.ParsePrivateKey)
	if err != nil {
		return sign.Key{}, err
	}
	keys, err := f.open().PrincipalKeys()
	if err != nil {
		return sign.Key{}, cli.Failed(err)
	}
	if !keys.Registered(by.String(), key.Public) {
		return sign.Key{}, cli.Invalid(fmt.Errorf("key %s (%s) is not registered for %s in %s: register its public key with narwhal evidence keys add --principal %s %s.pub",
			key.Public.ID(), path, by, f.open().Root, by, path))
	}
	return key, nil
}

// evKeysCmd registers and lists the principals' public keys.
func evKeysCmd(f *evFlags) *cobra.Command {
	c := &cobra.Command{Use: "keys", Short: "The principals' registered public keys, which acceptances must be signed with"}
	var principal string
	add := &cobra.Command{
		Use:   "add --principal P PUBKEY",
		Short: "Register a public key (narwhal evidence keygen's .pub) for a principal",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			by, err := decision.ParsePrincipal(principal, "cli")
			if err != nil {
				return cli.Invalid(err)
			}
			pub, err := readParsed(args[0], sign.ParsePublicKey)
			if err != nil {
				return err
			}
			added, err := f.open().AddPrincipalKey(by.String(), pub)
			if err != nil {
				return cli.Failed(err)
			}
			return f.emit(cmd, "keys add", map[string]any{"principal": by.String(), "key_id": pub.ID(), "added": added}, func(w io.Writer) {
				verb := "registered"
				if !added {
					verb = "already registered"
				}
				fmt.Fprintf(w, "%s key %s for %s\n", verb, pub.ID(), by)
			})
		},
	}
	add.Flags().StringVar(&principal, "principal", "", "the principal, kind:id (for example human:alice)")
	list := &cobra.Command{
		Use: "list", Short: "List each principal's registered keys", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return listKeys(cmd, f) },
	}
	c.AddCommand(add, list)
	return c
}

func listKeys(cmd *cobra.Command, f *evFlags) error {
	keys, err := f.open().PrincipalKeys()
	if err != nil {
		return cli.Failed(err)
	}
	ids := map[string][]string{}
	for who, pems := range keys.Principals {
		for _, p := range pems {
			if pub, err := sign.ParsePublicKey([]byte(p)); err == nil {
				ids[who] = append(ids[who], pub.ID())
			}
		}
	}
	return f.emit(cmd, "keys list", map[string]any{"principals": ids}, func(w io.Writer) {
		for _, who := range slices.Sorted(maps.Keys(ids)) {
			fmt.Fprintf(w, "%s  %s\n", who, strings.Join(ids[who], " "))
		}
	})
}

// evAdvisoriesCmd imports OSV advisories into the store's index, which
// security freshness is judged against.
func evAdvisoriesCmd(f *evFlags) *cobra.Command {
	c := &cobra.Command{Use: "advisories", Short: "The security advisories security freshness is judged against"}
	imp := &cobra.Command{
		Use:   "import FILE",
		Short: "Import OSV advisories (one record, an array, or osv.dev's {\"vulns\": [...]}) into the store's advisory index",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := readInput(args[0])
			if err != nil {
				return err
			}
			advs, err := osv.Parse(raw)
			if err != nil {
				return cli.Invalid(fmt.Errorf("%s: %w", args[0], err))
			}
			n, err := f.open().ImportAdvisories(raw, advs)
			if err != nil {
				return cli.Failed(err)
			}
			return f.emit(cmd, "advisories import", map[string]any{"imported": len(advs), "index": n}, func(w io.Writer) {
				fmt.Fprintf(w, "imported %d advisories from %s; the index holds %d\n", len(advs), args[0], n)
			})
		},
	}
	c.AddCommand(imp)
	return c
}

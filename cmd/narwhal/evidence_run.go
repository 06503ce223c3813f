package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/decision"
	"github.com/narwhal-go/narwhal/internal/evidence/serving"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/evidence/task"
	"github.com/narwhal-go/narwhal/internal/evidence/tierd"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
)

type journalFlags struct {
	fleet, request string
	window         time.Duration
	production     bool
}

func evFromJournalCmd(f *evFlags) *cobra.Command {
	j := &journalFlags{}
	c := &cobra.Command{
		Use:   "from-journal JOURNAL... --fleet F",
		Short: "Write serving-performance records from router journals, per engine execution, against the accepted DecisionRequest",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadFleet(j.fleet)
			if err != nil {
				return err
			}
			in, read, err := servingInput(f, cfg, j, args)
			if err != nil {
				return err
			}
			res, err := serving.Records(in, f.clock())
			if err != nil {
				return cli.Failed(err)
			}
			return writeServing(cmd, f, res, read)
		},
	}
	fl := c.Flags()
	fl.StringVar(&j.fleet, "fleet", "", "fleet file (narwhal.fleet v1) whose engines served the journal")
	fl.StringVar(&j.request, "request", "", "DecisionRequest revision to judge against (default: the newest accepted for the fleet's model)")
	fl.DurationVar(&j.window, "window", 0, "only the last D of each run (0: the whole journal)")
	fl.BoolVar(&j.production, "production", true, "the journal is production traffic (false: a controlled trial)")
	return c
}

func loadFleet(path string) (*fleet.Config, error) {
	if path == "" {
		return nil, cli.Usage("--fleet is required: name the fleet file")
	}
	cfg, err := fleet.Load(path)
	if err != nil {
		return nil, cli.Invalid(err)
	}
	return cfg, nil
}

// journalRead is what from-journal read of one journal set.
type journalRead struct {
	Path string `json:"path"`
	// Torn counts the torn rows skipped (a row a killed writer left
	// half-written); Truncated says the last file ended mid-row (a live
	// writer's row in progress, not read).
	Torn      journal.Torn `json:"torn_rows"`
	Truncated bool         `json:"truncated_final_row"`
}

func servingInput(f *evFlags, cfg *fleet.Config, j *journalFlags, paths []string) (serving.Input, []journalRead, error) {
	rs, err := f.records()
	if err != nil {
		return serving.Input{}, nil, err
	}
	st := f.open()
	rev, err := decision.ChooseRequest(st, rs, cfg.Model, j.request)
	if err != nil {
		return serving.Input{}, nil, cli.Failed(err)
	}
	req, err := decision.LoadRequest(st, rev)
	if err != nil {
		return serving.Input{}, nil, cli.Failed(err)
	}
	in := serving.Input{Bindings: serving.BindingsFrom(rs), Request: req, RequestDigest: rev, ProductionMode: j.production}
	var reads []journalRead
	for _, p := range paths {
		w := serving.NewWindow(iids(cfg), j.window)
		torn, err := journal.ScanBriefs(p, func(b *journal.Brief) error { w.Brief(b); return nil })
		truncated := errors.Is(err, journal.ErrTruncated)
		if err != nil && !truncated {
			return in, nil, cli.Invalid(fmt.Errorf("journal %s: %w", p, err))
		}
		in.Windows = append(in.Windows, w)
		reads = append(reads, journalRead{Path: p, Torn: torn, Truncated: truncated})
	}
	return in, reads, nil
}

func iids(cfg *fleet.Config) []string {
	out := make([]string, 0, len(cfg.Engines))
	for _, e := range cfg.Engines {
		out = append(out, e.IID)
	}
	return out
}

type writtenRecord struct {
	Record   string `json:"record"`
	Endpoint string `json:"endpoint"`
	Engines  any    `json:"engines"` // the fingerprint's replicas that served
	Verdict  string `json:"verdict"`
	Value    any    `json:"value"`
}

func writeRecords(st *store.Store, rs []evidence.Record) ([]writtenRecord, error) {
	out := []writtenRecord{}
	for _, r := range rs {
		d, err := st.PutRecord(r)
		if err != nil {
			return nil, cli.Failed(err)
		}
		engines := r.Display["engine_iids"] // serving records: the fingerprint's replicas
		if engines == nil {
			engines = []any{r.Display["engine_iid"]} // task records: one engine
		}
		out = append(out, writtenRecord{Record: d, Endpoint: r.Subject[evidence.SubjectEndpoint], Engines: engines,
			Verdict: *r.Claim.Verdict, Value: r.Claim.Value})
	}
	return out, nil
}

func writeServing(cmd *cobra.Command, f *evFlags, res serving.Result, reads []journalRead) error {
	rows, err := writeRecords(f.open(), res.Records)
	if err != nil {
		return err
	}
	notes := append([]string{}, res.Notes...)
	for _, r := range reads {
		if r.Torn.Rows > 0 {
			notes = append(notes, fmt.Sprintf("journal %s: %s, not counted", r.Path, r.Torn))
		}
		if r.Truncated {
			notes = append(notes, fmt.Sprintf("journal %s: its final row is unfinished (a writer mid-row), not counted", r.Path))
		}
	}
	return f.emit(cmd, "from-journal", map[string]any{"records": rows, "notes": notes, "journals": reads}, func(w io.Writer) {
		for _, r := range rows {
			fmt.Fprintf(w, "%s  endpoint %s  engines %v  %s  attainment %v\n", r.Record, shortDigest(r.Endpoint), r.Engines, r.Verdict, deref(r.Value))
		}
		for _, n := range notes {
			fmt.Fprintf(w, "note: %s\n", n)
		}
	})
}

func deref(v any) any {
	if p, ok := v.(*float64); ok && p != nil {
		return *p
	}
	return v
}

type taskFlags struct {
	fleet, suite, router, request, aggregated string
	timeout                                   time.Duration
}

func evTaskRunCmd(f *evFlags) *cobra.Command {
	t := &taskFlags{}
	c := &cobra.Command{
		Use:   "task-run --suite REVISION --router URL --fleet F",
		Short: "Run an accepted task suite through the router and record outcomes against its accepted quality floor",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runTasks(cmd, f, t) },
	}
	fl := c.Flags()
	fl.StringVar(&t.fleet, "fleet", "", "fleet file the router serves")
	fl.StringVar(&t.suite, "suite", "", "accepted task suite revision (digest)")
	fl.StringVar(&t.router, "router", "", "router base URL, for example http://127.0.0.1:8000")
	fl.StringVar(&t.request, "request", "", "DecisionRequest revision (default: the newest accepted for the fleet's model)")
	fl.StringVar(&t.aggregated, "aggregated", "", "engine iid serving the aggregated reference for pd_equivalence (default: the first engine)")
	fl.DurationVar(&t.timeout, "timeout", 2*time.Minute, "bound on the whole run")
	return c
}

func runTasks(cmd *cobra.Command, f *evFlags, t *taskFlags) error {
	if t.suite == "" || t.router == "" {
		return cli.Usage("--suite and --router are required")
	}
	cfg, err := loadFleet(t.fleet)
	if err != nil {
		return err
	}
	rs, err := f.records()
	if err != nil {
		return err
	}
	st := f.open()
	if err := decision.RequireAccepted(rs, decision.KindSuite, t.suite); err != nil {
		return cli.Failed(err)
	}
	rev, err := decision.ChooseRequest(st, rs, cfg.Model, t.request)
	if err != nil {
		return cli.Failed(err)
	}
	suite, err := decision.LoadSuite(st, t.suite)
	if err != nil {
		return cli.Failed(err)
	}
	target, err := taskTarget(cfg, t)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmdContext(cmd), t.timeout)
	defer cancel()
	outs, err := task.Run(ctx, suite, target)
	if err != nil {
		return cli.Failed(err)
	}
	eps, notes := taskEndpoints(rs, cfg)
	rows, err := writeRecords(st, task.Records(suite, t.suite, rev, eps, outs, f.clock()))
	if err != nil {
		return err
	}
	return f.emit(cmd, "task-run", map[string]any{"outcomes": outs, "records": rows, "notes": notes}, func(w io.Writer) {
		for _, o := range outs {
			fmt.Fprintf(w, "case %-14s pass=%v  %s\n", o.Case, o.Pass, o.Reason)
		}
		for _, r := range rows {
			fmt.Fprintf(w, "%s  engine %v  %s  pass rate %v\n", r.Record, r.Engines, r.Verdict, deref(r.Value))
		}
		for _, n := range notes {
			fmt.Fprintf(w, "note: %s\n", n)
		}
	})
}

func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

func taskTarget(cfg *fleet.Config, t *taskFlags) (task.Target, error) {
	agg := cfg.Engines[0]
	if t.aggregated != "" {
		i := slices.IndexFunc(cfg.Engines, func(e fleet.Engine) bool { return e.IID == t.aggregated })
		if i < 0 {
			return task.Target{}, cli.Invalid(fmt.Errorf("--aggregated %s is not an engine of the fleet", t.aggregated))
		}
		agg = cfg.Engines[i]
	}
	key, err := cfg.Engine.APIKey(os.LookupEnv)
	if err != nil {
		return task.Target{}, cli.Invalid(err)
	}
	return task.Target{Router: t.router, Aggregated: agg.URL, EngineKey: key, Model: cfg.Model,
		Client: &http.Client{Timeout: 60 * time.Second}}, nil
}

// taskEndpoints are the fleet's engines at their current fingerprints;
// an engine with no boot record gets no task record.
func taskEndpoints(rs []store.Stored, cfg *fleet.Config) ([]task.Endpoint, []string) {
	var eps []task.Endpoint
	notes := []string{}
	for _, e := range cfg.Engines {
		cur, ok := tierd.Current(rs, e.IID)
		if !ok {
			notes = append(notes, fmt.Sprintf("engine %s has no boot record: run narwhal-check first; no task record for it", e.IID))
			continue
		}
		eps = append(eps, task.Endpoint{IID: e.IID, Fingerprint: cur.Record.Subject[evidence.SubjectEndpoint], EngineVersion: cur.Record.Engine.Version, BootRecord: cur.Digest})
	}
	return eps, notes
}

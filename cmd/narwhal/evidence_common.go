package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/cmdresult"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/evidence/vllmrel"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// evFlags are the flags every evidence subcommand shares.
type evFlags struct {
	store, format, asOf string
}

func (f *evFlags) bind(c *cobra.Command) {
	pf := c.PersistentFlags()
	pf.StringVar(&f.store, "store", "evidence", "evidence store directory")
	cli.FormatFlag(pf, &f.format)
	pf.StringVar(&f.asOf, "as-of", "", "evaluate (and stamp new records) as of this time: RFC 3339 or YYYY-MM-DD (default: now)")
}

func (f *evFlags) json() bool { return f.format == "json" }

func (f *evFlags) check() error {
	if err := cli.CheckFormat(f.format); err != nil {
		return err
	}
	_, err := f.time()
	return err
}

// time is --as-of, or the system clock's now.
func (f *evFlags) time() (time.Time, error) {
	if f.asOf == "" {
		return ports.SystemClock().Now().UTC(), nil
	}
	for _, layout := range []string{time.RFC3339Nano, time.DateOnly} {
		if t, err := time.Parse(layout, f.asOf); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, cli.Usage("--as-of %q: want RFC 3339 (2026-03-01T12:00:00Z) or YYYY-MM-DD", f.asOf)
}

// clock stamps records: fixed at --as-of when given, else the system's.
func (f *evFlags) clock() ports.Clock {
	if f.asOf == "" {
		return ports.SystemClock()
	}
	t, _ := f.time()
	return ports.NewFake(t)
}

func (f *evFlags) open() *store.Store { return store.Open(f.store) }

func (f *evFlags) releases() (vllmrel.Index, error) {
	raw, err := f.open().ReadReleaseIndex()
	if err != nil {
		return vllmrel.Index{}, cli.Failed(err)
	}
	ix, err := vllmrel.Load(raw)
	if err != nil {
		return ix, cli.Failed(fmt.Errorf("%s/%s: %w (re-import it with narwhal evidence releases import FILE)", f.store, store.ReleaseIndexFile, err))
	}
	return ix, nil
}

// emit writes data as the JSON envelope, or calls text.
func (f *evFlags) emit(cmd *cobra.Command, op string, data any, text func(io.Writer)) error {
	if !f.json() {
		text(cmd.OutOrStdout())
		return nil
	}
	r := cmdresult.Result{Command: "narwhal evidence " + op, Operation: op, Status: cmdresult.Success, Data: data}
	if err := r.Write(cmd.OutOrStdout(), nil); err != nil {
		return cli.Failed(err)
	}
	return nil
}

// records loads the whole store.
func (f *evFlags) records() ([]store.Stored, error) {
	rs, err := f.open().Records()
	if err != nil {
		return nil, cli.Failed(err)
	}
	return rs, nil
}

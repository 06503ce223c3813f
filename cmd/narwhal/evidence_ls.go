package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
)

// lsRow is one record in `evidence ls`.
type lsRow struct {
	Digest    string   `json:"digest"`
	Kind      string   `json:"kind"`
	Level     string   `json:"level"`
	Claim     string   `json:"claim"`
	Contested bool     `json:"contested"`
	With      []string `json:"contested_with"` // the other records of the contested key
}

// contestMap maps each record digest to the other records of its key
// when that key is contested (both are always shown).
func contestMap(rs []store.Stored) (map[string][]string, map[string][]string, error) {
	recs := make([]evidence.Record, len(rs))
	for i, s := range rs {
		recs[i] = s.Record
	}
	res, err := evidence.Resolve(recs)
	if err != nil {
		return nil, nil, cli.Failed(err)
	}
	with, notes := map[string][]string{}, map[string][]string{}
	for _, r := range res {
		if !r.Contested {
			continue
		}
		for _, d := range r.Shown {
			for _, o := range r.Shown {
				if o != d {
					with[d] = append(with[d], o)
				}
			}
			notes[d] = r.Notes
		}
	}
	return with, notes, nil
}

func evLsCmd(f *evFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List stored records: digest, kind, level, claim; contested records are marked",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rs, err := f.records()
			if err != nil {
				return err
			}
			with, _, err := contestMap(rs)
			if err != nil {
				return err
			}
			rows := []lsRow{}
			for _, s := range rs {
				r := s.Record
				rows = append(rows, lsRow{Digest: s.Digest, Kind: string(r.Kind), Level: string(r.Level), Claim: claimText(r.Claim),
					Contested: len(with[s.Digest]) > 0, With: append([]string{}, with[s.Digest]...)})
			}
			return f.emit(cmd, "ls", map[string]any{"records": rows}, func(w io.Writer) { writeLs(w, rows) })
		},
	}
}

func writeLs(w io.Writer, rows []lsRow) {
	for _, r := range rows {
		mark := ""
		if r.Contested {
			mark = "  CONTESTED with " + joinShort(r.With)
		}
		fmt.Fprintf(w, "%s  %-14s %-24s %s%s\n", r.Digest, r.Kind, r.Level, r.Claim, mark)
	}
}

func joinShort(ds []string) string {
	s := ""
	for i, d := range ds {
		if i > 0 {
			s += ", "
		}
		s += d[:min(len(d), 16)]
	}
	return s
}

func evShowCmd(f *evFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show DIGEST",
		Short: "Print a stored record after re-verifying it; a contested record is shown with every record it disagrees with",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !canon.IsDigest(args[0]) {
				_, err := canon.ParseDigest(args[0])
				return cli.Invalid(err)
			}
			st := f.open()
			_, b, err := st.Get(args[0])
			if err != nil {
				return cli.Failed(err)
			}
			rs, err := f.records()
			if err != nil {
				return err
			}
			with, notes, err := contestMap(rs)
			if err != nil {
				return err
			}
			return showRecord(cmd, f, st, args[0], b, with[args[0]], notes[args[0]])
		},
	}
}

func showRecord(cmd *cobra.Command, f *evFlags, st *store.Store, digest string, b []byte, with, notes []string) error {
	others := map[string]string{}
	for _, d := range with {
		if _, ob, err := st.Get(d); err == nil {
			others[d] = string(ob)
		}
	}
	data := map[string]any{"digest": digest, "record": string(b), "contested": len(with) > 0, "contested_with": others,
		"notes": append([]string{}, notes...)}
	return f.emit(cmd, "show", data, func(w io.Writer) {
		w.Write(append(b, '\n'))
		if len(with) == 0 {
			return
		}
		fmt.Fprintf(w, "CONTESTED: nothing auto-resolves; every record of the claim is shown\n")
		for _, n := range notes {
			fmt.Fprintf(w, "  %s\n", n)
		}
		for _, d := range with {
			fmt.Fprintf(w, "%s\n%s\n", d, others[d])
		}
	})
}

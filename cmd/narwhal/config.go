package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/cmdresult"
	"github.com/narwhal-go/narwhal/internal/fleet"
)

func newConfigCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "config",
		Short: "Validate and inspect fleet files offline",
		Long: `Check a fleet file (narwhal.fleet v1) without contacting any engine.

Every independent problem is reported at once, one per line, each with its
public field path: a type error does not hide a range error elsewhere, a
newer schema_version does not hide the rest, duplicate JSON keys are
errors. Engine url and attestation_url must be http:// or https:// URLs
with a host; endpoint references (${NAME} in those two fields) are resolved
from the environment first.`,
	}
	c.AddCommand(
		newConfigAction("validate", "Check a fleet file and report every problem with its field path"),
		newConfigAction("inspect", "Print the effective configuration: defaults, resolved endpoints, derived values, artifact paths"),
	)
	return c
}

func newConfigAction(action, short string) *cobra.Command {
	var path, format string
	c := &cobra.Command{
		Use:   action + " --fleet PATH [--format text|json]",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return cli.Usage("--fleet is required: name the fleet file to %s", action)
			}
			if err := cli.CheckFormat(format); err != nil {
				return err
			}
			return runConfig(cmd.OutOrStdout(), cmd.ErrOrStderr(), action, path, format == "json")
		},
	}
	c.Flags().StringVar(&path, "fleet", "", "fleet file (narwhal.fleet v1), relative to the working directory")
	cli.FormatFlag(c.Flags(), &format)
	return c
}

func runConfig(stdout, stderr io.Writer, action, path string, asJSON bool) error {
	res := cmdresult.Result{Command: "narwhal", Operation: "config " + action}
	cfg, err := fleet.Load(path)
	if err != nil {
		return configFailure(stdout, stderr, res, err, asJSON)
	}
	red := cmdresult.NewRedactor(os.Environ(), cfg.Engine.EngineAPIKeyEnv)
	wd, err := os.Getwd()
	if err != nil {
		return cli.Failed(fmt.Errorf("read the working directory: %w", err))
	}
	eff, err := cfg.Inspect(path, wd)
	if err != nil {
		return cli.Failed(err)
	}
	if asJSON {
		res.Status, res.Data = cmdresult.Success, eff
		return res.Write(stdout, red)
	}
	if action == "validate" {
		fmt.Fprintf(stdout, "Validated %s: %d engines\n", eff.Source, len(cfg.Engines))
		return nil
	}
	out, err := cmdresult.SortedJSON(eff, "  ")
	if err != nil {
		return cli.Failed(err)
	}
	_, err = stdout.Write([]byte(red.String(string(out))))
	return err
}

// configFailure prints one stderr line per problem and, in JSON mode, the
// envelope with one error per problem.
func configFailure(stdout, stderr io.Writer, res cmdresult.Result, err error, asJSON bool) error {
	var le *fleet.LoadError
	if !errors.As(err, &le) {
		return cli.Failed(err)
	}
	red := cmdresult.NewRedactor(os.Environ())
	for _, line := range le.Lines() {
		fmt.Fprintln(stderr, red.String(line))
	}
	if !asJSON {
		return cli.Silent(cli.ExitInvalid)
	}
	res.Status = cmdresult.InvalidInput
	code := "invalid_input"
	switch {
	case le.Err != nil && errors.Is(le.Err, fs.ErrNotExist):
		code = "input_missing"
	case le.Err != nil && errors.Is(le.Err, fs.ErrPermission):
		res.Status, code = cmdresult.Error, "permission_denied"
	case le.Err != nil:
		res.Status, code = cmdresult.Error, "operation_failed"
	}
	lines := le.Lines()
	for i, p := range le.Problems {
		res.Errors = append(res.Errors, cmdresult.Problem{Code: code, Message: lines[i],
			Command: "narwhal", Stage: res.Operation, Field: p.Field})
	}
	if werr := res.Write(stdout, red); werr != nil {
		return cli.Failed(werr)
	}
	return cli.Silent(res.Status.ExitCode())
}

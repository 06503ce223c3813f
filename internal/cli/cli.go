// Package cli holds what every narwhal command shares: exit codes, the
// one-line error convention and running a cobra tree.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cmdresult"
	"github.com/narwhal-go/narwhal/internal/version"
)

// Exit codes shared by every command.
const (
	ExitOK          = 0
	ExitFailed      = 1 // the operation failed: an engine, a gate, a bind
	ExitInvalid     = 2 // bad arguments or bad input
	ExitInterrupted = 130
)

// ExitError carries the exit code a command wants. Its message has already
// been printed when Printed is true.
type ExitError struct {
	Code    int
	Err     error
	Printed bool
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Failed is an operation failure (exit 1).
func Failed(err error) error { return &ExitError{Code: ExitFailed, Err: err} }

// Invalid is bad input (exit 2).
func Invalid(err error) error { return &ExitError{Code: ExitInvalid, Err: err} }

// Silent exits with code after the command printed its own diagnostics.
func Silent(code int) error { return &ExitError{Code: code, Printed: true} }

// usageError marks a problem with the command line itself.
type usageError struct{ error }

// Usage is an argument problem found by the command (exit 2, and an
// invalid_arguments error in JSON mode).
func Usage(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// NewRoot returns a cobra command with narwhal's conventions: --version,
// no cobra-printed errors or usage on failure, argument errors as exit 2.
func NewRoot(use, short string) *cobra.Command {
	c := &cobra.Command{
		Use:           use,
		Short:         short,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	// Every command, not only the root, answers --version (Run intercepts
	// it); the flag is declared so that help lists it.
	c.PersistentFlags().Bool("version", false, "print the version and exit")
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	return c
}

// Run executes root with args and returns the process exit code. Errors are
// printed as one line on stderr, prefixed with the command's path. With
// --format json anywhere in args, a usage error also prints a
// command-result envelope on stdout, so scripts always get one object.
func Run(root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	if versionRequested(args) {
		fmt.Fprintln(stdout, version.String())
		return ExitOK
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if !ee.Printed && ee.Err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), ee.Err)
		}
		return ee.Code
	}
	// Anything else (unknown command, bad flag, wrong number of arguments,
	// a Usage error) is a problem with the command line.
	fmt.Fprintf(stderr, "%s: %v (see '%s --help')\n", cmd.CommandPath(), err, cmd.CommandPath())
	if JSONRequested(args) {
		writeUsageResult(stdout, root, cmd, err)
	}
	return ExitInvalid
}

// Main runs root on the process arguments and exits.
func Main(root *cobra.Command) {
	os.Exit(Run(root, os.Args[1:], os.Stdout, os.Stderr))
}

func versionRequested(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--version" {
			return true
		}
	}
	return false
}

// JSONRequested reports whether --format json appears in args before a
// literal "--".
func JSONRequested(args []string) bool {
	for i, a := range args {
		switch {
		case a == "--":
			return false
		case a == "--format=json":
			return true
		case a == "--format" && i+1 < len(args) && args[i+1] == "json":
			return true
		}
	}
	return false
}

var optionToken = regexp.MustCompile(`--[a-z][a-z0-9-]*`)

func writeUsageResult(w io.Writer, root, cmd *cobra.Command, err error) {
	p := cmdresult.Problem{Code: "invalid_arguments", Message: err.Error(), Command: root.Name(), Stage: "arguments"}
	if f := optionToken.FindString(err.Error()); f != "" {
		p.Field = f
	}
	res := cmdresult.Result{Command: root.Name(), Operation: Operation(cmd), Status: cmdresult.InvalidInput,
		Errors: []cmdresult.Problem{p}}
	_ = res.Write(w, cmdresult.NewRedactor(os.Environ()))
}

// Operation is a command's path below the root: "config validate".
func Operation(cmd *cobra.Command) string {
	path := cmd.CommandPath()
	if i := strings.IndexByte(path, ' '); i >= 0 {
		return path[i+1:]
	}
	return "run"
}

// IsUsage reports whether err is an argument error found by cobra.
func IsUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

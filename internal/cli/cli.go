// Package cli holds what every narwhal command shares: exit codes, the
// one-line error convention and running a cobra tree.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

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

// usageError marks a problem cobra found in the arguments.
type usageError struct{ error }

// NewRoot returns a cobra command with narwhal's conventions: --version,
// no cobra-printed errors or usage on failure, argument errors as exit 2.
func NewRoot(use, short string) *cobra.Command {
	c := &cobra.Command{
		Use:           use,
		Short:         short,
		Version:       version.String(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	c.SetVersionTemplate("{{.Version}}\n")
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	return c
}

// Run executes root with args and returns the process exit code. Errors are
// printed as one line on stderr, prefixed with the command's path.
func Run(root *cobra.Command, args []string, stderr io.Writer) int {
	root.SetArgs(args)
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
	// Anything else cobra returns (unknown command, bad flag, wrong number
	// of arguments) is a usage problem.
	fmt.Fprintf(stderr, "%s: %v (see '%s --help')\n", cmd.CommandPath(), err, cmd.CommandPath())
	return ExitInvalid
}

// Main runs root on the process arguments and exits.
func Main(root *cobra.Command) {
	os.Exit(Run(root, os.Args[1:], os.Stderr))
}

// IsUsage reports whether err is an argument error found by cobra.
func IsUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

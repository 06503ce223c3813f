package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func testRoot(runE func() error) *cobra.Command {
	root := NewRoot("tool", "a tool")
	sub := &cobra.Command{Use: "do", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return runE() }}
	sub.Flags().String("format", "text", "")
	root.AddCommand(sub)
	return root
}

func TestRunExitCodes(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		err    error
		code   int
		stderr string
		json   bool
	}{
		{"ok", []string{"do"}, nil, 0, "", false},
		{"failed", []string{"do"}, Failed(errors.New("engine p0 unreachable")), 1, "tool do: engine p0 unreachable\n", false},
		{"invalid", []string{"do"}, Invalid(errors.New("bad file")), 2, "tool do: bad file\n", false},
		{"silent", []string{"do"}, Silent(3), 3, "", false},
		{"usage", []string{"do"}, Usage("--x is required"), 2, "tool do: --x is required (see 'tool do --help')\n", false},
		{"unknown flag", []string{"do", "--nope"}, nil, 2, "unknown flag: --nope", false},
		{"extra argument", []string{"do", "x"}, nil, 2, "unknown command", false},
		{"usage in json mode", []string{"do", "--format", "json", "--nope"}, nil, 2, "unknown flag", true},
		{"version anywhere", []string{"do", "--version"}, errors.New("not run"), 0, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Run(testRoot(func() error { return tc.err }), tc.args, &out, &errb)
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, errb.String())
			}
			if !strings.Contains(errb.String(), tc.stderr) || (tc.stderr == "" && errb.Len() > 0) {
				t.Errorf("stderr = %q, want %q", errb.String(), tc.stderr)
			}
			if tc.json {
				var m map[string]any
				if err := json.Unmarshal(out.Bytes(), &m); err != nil || m["status"] != "invalid_input" || m["operation"] != "do" {
					t.Errorf("stdout = %q (%v), want an invalid_input envelope", out.String(), err)
				}
			}
		})
	}
}

func TestJSONRequested(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--format", "json"}, true},
		{[]string{"x", "--format=json"}, true},
		{[]string{"--format", "text"}, false},
		{[]string{"--", "--format", "json"}, false},
		{[]string{"--format"}, false},
	} {
		if got := JSONRequested(tc.args); got != tc.want {
			t.Errorf("JSONRequested(%q) = %v", tc.args, got)
		}
	}
}

// --format defaults to text; text and json pass, anything else is a usage
// error (exit 2) that names the value.
func TestFormatFlag(t *testing.T) {
	var format string
	c := NewRoot("x", "x")
	FormatFlag(c.Flags(), &format)
	if err := c.ParseFlags(nil); err != nil || format != "text" {
		t.Fatalf("default --format %q (%v), want text", format, err)
	}
	for _, ok := range []string{"text", "json"} {
		if err := CheckFormat(ok); err != nil {
			t.Errorf("CheckFormat(%q) = %v", ok, err)
		}
	}
	err := CheckFormat("yaml")
	var u usageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), `"yaml"`) {
		t.Errorf("CheckFormat(yaml) = %v, want a usage error naming it", err)
	}
}

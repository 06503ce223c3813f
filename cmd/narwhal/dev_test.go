package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/cli"
)

// narwhal dev run takes its admin token from the variable --admin-token-env
// names, as narwhal-serve does, and never prints the value.
func TestDevRunAdminTokenEnv(t *testing.T) {
	t.Setenv("NARWHAL_TEST_ADMIN", "dev-run-admin-secret")
	tests := []struct {
		name, env string
		code      int
		want      string
	}{
		{"unset variable", "NARWHAL_TEST_UNSET_ADMIN", cli.ExitInvalid, "--admin-token-env NARWHAL_TEST_UNSET_ADMIN names an unset or empty variable"},
		{"operator's token", "NARWHAL_TEST_ADMIN", cli.ExitOK, "admin token       from $NARWHAL_TEST_ADMIN"},
		{"generated token", "", cli.ExitOK, "(generated for this run"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			root := newRoot()
			root.SetContext(ctx)
			args := []string{"dev", "run", "--port", "0", "--dir", filepath.Join(t.TempDir(), "dev")}
			if tc.env != "" {
				args = append(args, "--admin-token-env", tc.env)
			}
			out, errb := &stopAtBanner{stop: cancel}, &bytes.Buffer{}
			code := cli.Run(root, args, out, errb)
			if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.want) || strings.Contains(out.String(), "dev-run-admin-secret") {
				t.Fatalf("exit %d (want %d)\nout %s\nerr %s", code, tc.code, out.String(), errb.String())
			}
		})
	}
}

// stopAtBanner is stdout that stops the fleet once its banner is printed.
type stopAtBanner struct {
	bytes.Buffer
	stop func()
}

func (s *stopAtBanner) Write(p []byte) (int, error) {
	n, err := s.Buffer.Write(p)
	if strings.Contains(s.String(), "Ctrl-C stops everything") {
		s.stop()
	}
	return n, err
}

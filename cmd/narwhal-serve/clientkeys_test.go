package main

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/cli"
)

// --api-key-env takes repeated and comma-separated names; each must name
// a set, non-blank variable.
func TestClientKeysFromEnv(t *testing.T) {
	t.Setenv("GATE_KEY_A", "key-a")
	t.Setenv("GATE_KEY_B", " key-b\n")
	t.Setenv("GATE_KEY_BLANK", "  ")
	for _, tc := range []struct {
		name  string
		flags []string
		keys  []string
		bad   string // the variable the error names
	}{
		{"none", nil, nil, ""},
		{"one", []string{"GATE_KEY_A"}, []string{"key-a"}, ""},
		{"repeated", []string{"GATE_KEY_A", "GATE_KEY_B"}, []string{"key-a", "key-b"}, ""},
		{"comma-separated", []string{"GATE_KEY_A, GATE_KEY_B"}, []string{"key-a", "key-b"}, ""},
		{"unset", []string{"GATE_KEY_A", "GATE_KEY_UNSET"}, nil, "GATE_KEY_UNSET"},
		{"blank", []string{"GATE_KEY_BLANK"}, nil, "GATE_KEY_BLANK"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := clientKeys(tc.flags)
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), "--api-key-env "+tc.bad) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %v, want one line naming %s", err, tc.bad)
				}
				return
			}
			if err != nil || strings.Join(keys, "|") != strings.Join(tc.keys, "|") {
				t.Fatalf("keys %q, %v; want %q", keys, err, tc.keys)
			}
		})
	}
}

// An unset key variable stops narwhal-serve before anything else with
// exit 2 and a one-line error naming the variable.
func TestUnsetAPIKeyEnvExitsTwo(t *testing.T) {
	var stderr bytes.Buffer
	code := cli.Run(newRoot(), []string{"--fleet", "no-such-fleet.json", "--api-key-env", "GATE_KEY_NEVER_SET"}, io.Discard, &stderr)
	if code != cli.ExitInvalid || !strings.Contains(stderr.String(), "GATE_KEY_NEVER_SET") || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
		t.Fatalf("exit %d, stderr %q; want 2 and one line naming the variable", code, stderr.String())
	}
}

// Without keys on a non-loopback address, start logs one WARN line saying
// the ingress must authenticate; loopback, or keys, log nothing.
func TestUnauthenticatedWarning(t *testing.T) {
	for _, tc := range []struct {
		host string
		keys []string
		warn bool
	}{
		{"0.0.0.0", nil, true},
		{"10.1.2.3", nil, true},
		{"::", nil, true},
		{"127.0.0.1", nil, false},
		{"localhost", nil, false},
		{"0.0.0.0", []string{"sk-never-logged"}, false},
	} {
		var buf bytes.Buffer
		warnUnauthenticated(slog.New(slog.NewTextHandler(&buf, nil)), tc.host, tc.keys)
		out := buf.String()
		if got := strings.Contains(out, "level=WARN") && strings.Contains(out, "ingress"); got != tc.warn || strings.Count(out, "\n") > 1 {
			t.Errorf("host %s keys %d: log %q, want warning %v on one line", tc.host, len(tc.keys), out, tc.warn)
		}
		if strings.Contains(out, "sk-never-logged") {
			t.Error("a key reached the log")
		}
	}
}

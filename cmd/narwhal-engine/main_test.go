package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/cli"
)

func TestCommandErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--version"}, cli.ExitOK, ""},
		{[]string{"sim", "--fail-startup", "nope"}, cli.ExitInvalid, "kv-cache-too-small or cuda-oom"},
		{[]string{"sim", "--profile", "/nonexistent.json"}, cli.ExitInvalid, "/nonexistent.json"},
		{[]string{"sim", "--port", "0", "--fail-startup", "cuda-oom"}, cli.ExitFailed, "startup failed"},
		{[]string{"sim-fleet", "--engines", "0"}, cli.ExitInvalid, "--engines"},
		{[]string{"sim", "--bogus"}, cli.ExitInvalid, "bogus"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			root := newRoot()
			root.SetOut(&bytes.Buffer{})
			if code := cli.Run(root, c.args, &bytes.Buffer{}, &stderr); code != c.code || !strings.Contains(stderr.String(), c.want) {
				t.Fatalf("exit %d (want %d), stderr %q", code, c.code, stderr.String())
			}
		})
	}
}

package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

// NodeSDK is node and the repository's scripts/node directory with the
// official OpenAI JavaScript SDK installed (make node-deps). Missing
// either, it fails the test in CI (where make test installs them) and
// skips it elsewhere.
func NodeSDK(t testing.TB) (node, dir string) {
	t.Helper()
	node = Tool(t, "node", "Node.js with npm; make node-deps installs the SDK")
	dir, err := nodeDir()
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the OpenAI JS SDK is missing in CI (make node-deps installs scripts/node): %v", err)
		}
		t.Skipf("the OpenAI JS SDK is not installed (%v); run make node-deps", err)
	}
	return node, dir
}

// nodeDir is scripts/node of the module the test runs in: the first
// directory upward from the working directory that holds go.mod.
func nodeDir() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for range 32 {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "scripts", "node"), nil
		}
		up := filepath.Dir(d)
		if up == d {
			break
		}
		d = up
	}
	return "", os.ErrNotExist
}

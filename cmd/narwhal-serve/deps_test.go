package main

import (
	"debug/buildinfo"
	"strings"
	"testing"
)

// TestNoSigstoreInRouter keeps sigstore-go and its requirements out of the
// router binary: only `narwhal evidence verify-bundle` needs them
// (docs/evidence.md, "Cost"), and the router would carry their package
// initialisation at every start.
func TestNoSigstoreInRouter(t *testing.T) {
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range bi.Deps {
		if strings.HasPrefix(d.Path, "github.com/sigstore/") || strings.HasPrefix(d.Path, "github.com/go-openapi/") {
			t.Errorf("narwhal-serve links %s %s; keep internal/evidence/sigbundle out of its imports", d.Path, d.Version)
		}
	}
	if len(bi.Deps) == 0 {
		t.Fatal("no module dependencies in the build info; the check would pass vacuously")
	}
}

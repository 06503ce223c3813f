// Package simkit holds test builders for simulated fleets that several
// packages' tests share: an attestation sidecar beside a simengine and a
// quick profile row. Only tests import it.
package simkit

import (
	"context"
	"testing"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

// Sidecar serves e's attestation document on addr ("127.0.0.1:0" picks a
// free port), as narwhal-attest does beside a vLLM engine, and closes it
// when the test ends.
func Sidecar(t testing.TB, e *simengine.Engine, addr string) *attest.Server {
	t.Helper()
	doc, err := attest.Parse("sim", e.AttestationDocument())
	if err != nil {
		t.Fatal(err)
	}
	s, err := attest.ServeEngine(context.Background(), doc, e.URL(), addr, nil, e)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// FastRow is a profile whose pace prompt (100 words, 300 tokens) takes
// 80 ms: long enough that HTTP overhead is small against preflight's 1.5×
// limit, short enough to keep a suite quick.
func FastRow(iid string) profile.Row {
	one, maxReq, minKV, maxKV := 1, 64, 256, 65536
	rs, fit, cv := 1e-5, 0.02, 0.04
	return profile.Row{IID: iid, TTFTB: 1e-4, TTFTC: 0.05, TPOTSlope: 1e-8, TPOTIntercept: 0.004,
		TPOTRequestSlope: &rs, DecodeMinRequests: &one, DecodeMaxRequests: &maxReq, DecodeMinKVTokens: &minKV,
		DecodeMaxKVTokens: &maxKV, DecodeFitMAPE: &fit, DecodeCVMAPE: &cv}
}

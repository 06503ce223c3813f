package main

import (
	"context"
	"log/slog"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

// startSidecar runs narwhal-attest's server beside e on host:port (port 0
// picks a free one), so a simulated fleet is a contracted fleet.
func startSidecar(ctx context.Context, e *simengine.Engine, host string, port int, log *slog.Logger) (*attest.Server, error) {
	doc, err := attest.Parse("simengine", e.AttestationDocument())
	if err != nil {
		return nil, err
	}
	return attest.ServeEngine(ctx, doc, e.URL(), cli.Addr(host, port), log, e)
}

package main

import (
	"log/slog"
	"os"
	"strings"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/httpguard"
)

// clientKeys reads the client API keys from the variables --api-key-env
// names (repeated, or comma-separated): several keys are accepted at once,
// so a new key can be handed out before the old one is withdrawn. A named
// variable that is unset or blank refuses to start: the operator asked
// for authentication, and serving without it would be silent.
func clientKeys(names []string) ([]string, error) {
	var keys []string
	for _, list := range names {
		for _, name := range strings.Split(list, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			v := strings.TrimSpace(os.Getenv(name))
			if v == "" {
				return nil, cli.Usage("--api-key-env %s names an unset or empty variable: export the client key in it, or drop the flag", name)
			}
			keys = append(keys, v)
		}
	}
	return keys, nil
}

// warnUnauthenticated says once, at start, that /v1/* takes any client
// when the router listens beyond loopback without keys: the ingress in
// front must authenticate (docs/router.md, "Client authentication").
func warnUnauthenticated(log *slog.Logger, host string, keys []string) {
	if len(keys) == 0 && !httpguard.IsLoopback(host) {
		log.Warn("clients are NOT authenticated: /v1/* is open to anyone who reaches this address; authenticate at the ingress in front, or start narwhal-serve with --api-key-env NAME",
			"host", host)
	}
}

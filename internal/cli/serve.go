package cli

import (
	"context"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

// Addr is the host:port a command's --host and --port flags name.
func Addr(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// UntilSignal is ctx until SIGINT or SIGTERM arrives: how every serving
// command learns to stop. A nil ctx is context.Background.
func UntilSignal(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx == nil {
		ctx = context.Background()
	}
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

package kvevents

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"strings"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// TCPAddr turns a ZeroMQ tcp endpoint into a Go address ("*" is every
// interface). narwhal accepts tcp:// only, the transport its tests
// exercise; zmq4 also has ipc://, which nothing here has been tried on.
func TCPAddr(endpoint string) (string, error) {
	rest, ok := strings.CutPrefix(endpoint, "tcp://")
	if !ok {
		return "", fmt.Errorf("kvevents: endpoint %q is not tcp://host:port (only the tcp transport is supported)", endpoint)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return "", fmt.Errorf("kvevents: endpoint %q: %w", endpoint, err)
	}
	if host == "*" {
		host = ""
	}
	return net.JoinHostPort(host, port), nil
}

// dialScheme is zmq4's tcp transport with one difference: a connection
// is closed when its socket closes, also while zmq4 is still in the ZMTP
// handshake. zmq4's own tcp transport leaves a handshake with a peer that
// accepted the connection but never answers (a frozen engine process)
// blocked for as long as the peer keeps it open; with this one, closing
// the socket after the dial timeout ends it.
const dialScheme = "narwhal-tcp"

type closingTCP struct{ transport.Transport }

func (t closingTCP) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	c, err := t.Transport.Dial(ctx, d, addr)
	if err == nil {
		context.AfterFunc(ctx, func() { c.Close() })
	}
	return c, err
}

func init() {
	if err := zmq4.RegisterTransport(dialScheme, closingTCP{transport.New("tcp")}); err != nil {
		panic(err) // only a second registration of the same name fails
	}
}

// quiet is the logger zmq4 writes to: it would print to stderr when a
// peer fails its handshake; the socket's own errors reach the caller.
var quiet = log.New(io.Discard, "", 0)

// dial connects s to a tcp endpoint within to, or closes s and says why.
// zmq4 retries nothing here: the caller resubscribes with its own delay.
func dial(ctx context.Context, s zmq4.Socket, endpoint string, to time.Duration) error {
	addr, err := TCPAddr(endpoint)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- s.Dial(dialScheme + "://" + addr) }()
	t := time.NewTimer(to)
	defer t.Stop()
	select {
	case err = <-done:
		if err == nil {
			return nil
		}
		s.Close()
	case <-t.C:
		err = fmt.Errorf("no ZMTP handshake within %v", to)
		s.Close()
		<-done // closing the socket ends a dial still under way
	case <-ctx.Done():
		err = ctx.Err()
		s.Close()
		<-done
	}
	return fmt.Errorf("kvevents: connect %s: %w (is the engine publishing KV events there?)", endpoint, err)
}

// socketOptions are every narwhal zmq4 socket's: no retries inside zmq4,
// a bounded TCP dial, no log output.
func socketOptions(to time.Duration) []zmq4.Option {
	return []zmq4.Option{zmq4.WithDialerMaxRetries(0), zmq4.WithDialerTimeout(to), zmq4.WithTimeout(to), zmq4.WithLogger(quiet)}
}

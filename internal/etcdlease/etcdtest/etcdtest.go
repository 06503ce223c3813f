// Package etcdtest runs a real single-member etcd server (Debian's
// etcd-server package, installed by `make test`) on loopback for tests:
// random ports, a temporary data directory, stopped at the test's end.
package etcdtest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/testkit"
)

// Server is one etcd process; Stop and Start keep its ports and data.
type Server struct {
	t            *testing.T
	dir          string
	client, peer int
	cmd          *exec.Cmd
	done         chan struct{}
	log          *testkit.SyncBuffer
}

// Start runs etcd, or skips the test when the binary is missing (make
// test installs it; a bare `go test` on a machine without it skips).
func Start(t *testing.T) *Server {
	t.Helper()
	if _, err := exec.LookPath("etcd"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("etcd is not installed on CI: the Makefile's tools step installs Debian's etcd-server")
		}
		t.Skip("etcd is not installed: run `make tools` (Debian package etcd-server)")
	}
	ports := freePorts(t, 2)
	s := &Server{t: t, dir: t.TempDir(), client: ports[0], peer: ports[1], log: &testkit.SyncBuffer{}}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Endpoint is the client URL.
func (s *Server) Endpoint() string { return fmt.Sprintf("http://127.0.0.1:%d", s.client) }

// Start (re)starts the process and waits until it serves.
func (s *Server) Start() {
	s.t.Helper()
	peer := fmt.Sprintf("http://127.0.0.1:%d", s.peer)
	s.cmd = exec.Command("etcd", "--name", "t", "--data-dir", s.dir,
		"--listen-client-urls", s.Endpoint(), "--advertise-client-urls", s.Endpoint(),
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "t="+peer, "--heartbeat-interval", "50", "--election-timeout", "500",
		"--log-level", "error", "--logger", "zap")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start etcd: %v", err)
	}
	s.done = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(s.cmd, s.done)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(s.Endpoint() + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-s.done:
			s.t.Fatalf("etcd exited at start:\n%s", s.log.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	s.t.Fatalf("etcd did not become healthy in 20 s:\n%s", s.log.String())
}

// Stop ends the process (SIGTERM, then SIGKILL after 5 s) and waits.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

// freePorts reserves n loopback ports at once (so they differ) and frees
// them for etcd to bind.
func freePorts(t *testing.T, n int) []int {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

package kvevents

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// python is Debian's interpreter, where make's pyzmq target installs
// python3-zmq and python3-msgpack (a pyenv python3 first on PATH has
// neither).
const python = "/usr/bin/python3"

// PyProc is a testdata script on pyzmq (libzmq), driven one line at a
// time over its stdin and stdout. Exported for interop_test.go.
type PyProc struct {
	name   string
	cmd    *exec.Cmd
	cancel context.CancelFunc
	stdin  io.WriteCloser
	lines  chan string
	eof    chan struct{} // closed once stdout has ended
	quit   chan struct{} // closed by Stop: lines nobody will read are dropped
	once   sync.Once
}

// StartPython runs /usr/bin/python3 args… until the test ends (closing
// its stdin, then killing it after 5 s), or skips the test when that
// python lacks zmq or msgpack.
func StartPython(t *testing.T, args ...string) *PyProc {
	t.Helper()
	if out, err := exec.Command(python, "-c", "import zmq, msgpack").CombinedOutput(); err != nil {
		t.Skipf("%s lacks zmq or msgpack (make pyzmq installs Debian's python3-zmq and python3-msgpack): %v: %s", python, err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, python, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logWriter{t, args[0]}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &PyProc{name: args[0], cmd: cmd, cancel: cancel, stdin: stdin, lines: make(chan string, 16),
		eof: make(chan struct{}), quit: make(chan struct{})}
	go func() {
		defer close(p.eof)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			case <-p.quit:
			}
		}
	}()
	t.Cleanup(func() { p.Stop(t) })
	return p
}

// Stop closes the script's stdin, at whose end it exits, and waits for
// it, killing it after 5 s. Later calls do nothing.
func (p *PyProc) Stop(t *testing.T) {
	t.Helper()
	p.once.Do(func() {
		defer p.cancel()
		close(p.quit)
		p.stdin.Close()
		select {
		case <-p.eof:
		case <-time.After(5 * time.Second):
			p.cancel()
			<-p.eof
			t.Errorf("%s did not exit within 5 s of its stdin closing; killed", p.name)
		}
		_ = p.cmd.Wait() // after stdout's end, as os/exec asks
	})
}

// Line is the script's next line of output, within 10 s.
func (p *PyProc) Line(t *testing.T) string {
	t.Helper()
	select {
	case l := <-p.lines:
		return l
	case <-p.eof:
		select {
		case l := <-p.lines:
			return l
		default:
			t.Fatalf("%s exited (its stderr is in the log above)", p.name)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not answer within 10 s", p.name)
	}
	return ""
}

// Send writes one command line.
func (p *PyProc) Send(t *testing.T, command string) {
	t.Helper()
	if _, err := fmt.Fprintln(p.stdin, command); err != nil {
		t.Fatal(err)
	}
}

type logWriter struct {
	t    *testing.T
	name string
}

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s: %s", w.name, b)
	return len(b), nil
}

package kvevents

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
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
	stdin io.WriteCloser
	lines chan string
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
	p := &PyProc{stdin: stdin, lines: make(chan string, 16)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		stdin.Close() // the scripts exit at the end of their stdin
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cancel()
			<-done
			t.Errorf("%s did not exit within 5 s of its stdin closing; killed", args[0])
		}
		cancel()
	})
	return p
}

// Line is the script's next line of output, within 10 s.
func (p *PyProc) Line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatal("the python script exited (its stderr is in the log above)")
		}
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("the python script did not answer within 10 s")
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

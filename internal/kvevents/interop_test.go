package kvevents_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/kvevents"
	"github.com/narwhal-go/narwhal/internal/residency"
)

// python is Debian's interpreter, where make's pyzmq target installs
// python3-zmq and python3-msgpack (a pyenv python3 first on PATH has
// neither).
const python = "/usr/bin/python3"

// libzmqPublisher is testdata/vllm_publisher.py: vLLM's publisher on
// libzmq, driven one command at a time.
type libzmqPublisher struct {
	Endpoint       string `json:"endpoint"`
	ReplayEndpoint string `json:"replay_endpoint"`
	stdin          io.WriteCloser
	lines          chan string
}

// state is the publisher's answer to a command.
type state struct {
	Seq    int64    `json:"seq"`
	Blocks []uint64 `json:"blocks"`
}

func startLibzmqPublisher(t *testing.T, format, topic string) *libzmqPublisher {
	t.Helper()
	if out, err := exec.Command(python, "-c", "import zmq, msgpack").CombinedOutput(); err != nil {
		t.Skipf("%s lacks zmq or msgpack (make pyzmq installs Debian's python3-zmq and python3-msgpack): %v: %s", python, err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, python, "testdata/vllm_publisher.py", "--format", format, "--topic", topic)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &libzmqPublisher{stdin: stdin, lines: make(chan string, 16)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		stdin.Close() // the script exits at the end of its stdin
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cancel()
			<-done
			t.Error("vllm_publisher.py did not exit within 5 s of its stdin closing; killed")
		}
		cancel()
	})
	if err := json.Unmarshal([]byte(p.line(t)), p); err != nil || p.Endpoint == "" || p.ReplayEndpoint == "" {
		t.Fatalf("vllm_publisher.py's first line is not its endpoints: %v", err)
	}
	return p
}

func (p *libzmqPublisher) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatal("vllm_publisher.py exited (its stderr is in the log above)")
		}
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("vllm_publisher.py did not answer within 10 s")
	}
	return ""
}

func (p *libzmqPublisher) do(t *testing.T, command string) state {
	t.Helper()
	if _, err := fmt.Fprintln(p.stdin, command); err != nil {
		t.Fatal(err)
	}
	var s state
	if err := json.Unmarshal([]byte(p.line(t)), &s); err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	return s
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(b []byte) (int, error) {
	w.t.Logf("vllm_publisher.py: %s", b)
	return len(b), nil
}

// reaches polls x until it has applied seq, for at most 10 s.
func reaches(t *testing.T, x *residency.Index, seq int64) residency.Snapshot {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := x.Snapshot()
		if s.Sequence >= seq || time.Now().After(deadline) {
			return s
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func resident(s residency.Snapshot) []uint64 {
	var out []uint64
	for _, g := range s.Groups {
		out = append(out, g.Identities...)
	}
	slices.Sort(out)
	return out
}

// TestLibzmqPublisherInterop: narwhal's subscriber (zmq4 SUB + DEALER)
// follows a publisher on libzmq that speaks vLLM's wire format, current
// (map events, topic in replay answers) and before vLLM 0.26 (positional
// events, two-frame answers). The residency index must hold exactly the
// publisher's blocks after live batches, after a range the PUB socket
// never sent (only the replay has it), and after a cache reset.
func TestLibzmqPublisherInterop(t *testing.T) {
	for _, format := range []string{"map", "array"} {
		t.Run(format, func(t *testing.T) {
			const topic = "kv@127.0.0.1@model"
			p := startLibzmqPublisher(t, format, topic)
			x := residency.NewIndex("interop", 0, nil)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			sub := kvevents.Subscriber{Endpoint: p.Endpoint, ReplayEndpoint: p.ReplayEndpoint, Topic: "kv@", Timeout: 5 * time.Second}
			go func() { done <- sub.Run(ctx, x) }()
			t.Cleanup(func() {
				cancel()
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					t.Error("subscriber did not stop within 5 s")
				}
			})
			// Until the PUB socket has the subscription, libzmq drops what
			// it publishes; publish until a batch is applied.
			var s state
			for i := 0; i < 100 && x.Snapshot().Sequence < 0; i++ {
				s = p.do(t, "live 1")
				reachesWithin(x, s.Seq, 50*time.Millisecond)
			}
			for _, step := range []string{"live 20", "drop 5", "live 3", "drop 1", "live 1", "clear", "live 4"} {
				s = p.do(t, step)
				if step == "drop 5" || step == "drop 1" {
					continue // only the next live batch reveals the gap
				}
				got := reaches(t, x, s.Seq)
				if !got.Known || got.Sequence != s.Seq {
					t.Fatalf("after %q: index known=%v (%s) at sequence %d, want known at %d", step, got.Known, got.Reason, got.Sequence, s.Seq)
				}
				if want := s.Blocks; !slices.Equal(resident(got), want) {
					t.Fatalf("after %q: index holds %d blocks %v, publisher %d %v", step, len(resident(got)), resident(got), len(want), want)
				}
			}
		})
	}
}

func reachesWithin(x *residency.Index, seq int64, d time.Duration) {
	deadline := time.Now().Add(d)
	for x.Snapshot().Sequence < seq && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

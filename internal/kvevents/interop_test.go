package kvevents_test

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/kvevents"
	"github.com/narwhal-go/narwhal/internal/residency"
)

// libzmqPublisher is testdata/vllm_publisher.py: vLLM's publisher on
// libzmq.
type libzmqPublisher struct {
	Endpoint       string `json:"endpoint"`
	ReplayEndpoint string `json:"replay_endpoint"`
	proc           *kvevents.PyProc
}

// state is the publisher's answer to a command.
type state struct {
	Seq    int64    `json:"seq"`
	Blocks []uint64 `json:"blocks"`
}

func startLibzmqPublisher(t *testing.T, format, topic string, more ...string) *libzmqPublisher {
	t.Helper()
	args := append([]string{"testdata/vllm_publisher.py", "--format", format, "--topic", topic}, more...)
	p := &libzmqPublisher{proc: kvevents.StartPython(t, args...)}
	if err := json.Unmarshal([]byte(p.proc.Line(t)), p); err != nil || p.Endpoint == "" || p.ReplayEndpoint == "" {
		t.Fatalf("vllm_publisher.py's first line is not its endpoints: %v", err)
	}
	return p
}

func (p *libzmqPublisher) do(t *testing.T, command string) state {
	t.Helper()
	p.proc.Send(t, command)
	var s state
	if err := json.Unmarshal([]byte(p.proc.Line(t)), &s); err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	return s
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

// sync publishes one batch at a time until x applies one: libzmq drops
// what PUB sends before the subscription reaches it.
func (p *libzmqPublisher) sync(t *testing.T, x *residency.Index) {
	t.Helper()
	for i := 0; i < 100; i++ {
		s := p.do(t, "live 1")
		reachesWithin(x, s.Seq, 50*time.Millisecond)
		if x.Snapshot().Sequence >= s.Seq {
			return
		}
	}
	t.Fatal("no batch reached the subscriber in 100 tries")
}

func port(t *testing.T, endpoint string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(endpoint, "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFollowResubscribesAfterTheEngineRestarts: when the libzmq
// publisher's process ends, residency.Follow marks residency unknown,
// and once an engine publishes on the same ports again it resubscribes
// and the index holds the new process's blocks (its history from 0).
func TestFollowResubscribesAfterTheEngineRestarts(t *testing.T) {
	a := startLibzmqPublisher(t, "map", "kv")
	x := residency.NewIndex("restart", 0, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	sub := kvevents.Subscriber{Endpoint: a.Endpoint, ReplayEndpoint: a.ReplayEndpoint, Topic: "kv", Timeout: 2 * time.Second}
	go func() { defer close(done); residency.Follow(ctx, sub, x, 50*time.Millisecond) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Follow did not stop within 5 s")
		}
	})
	a.sync(t, x)
	a.proc.Stop(t)
	deadline := time.Now().Add(10 * time.Second)
	for x.Snapshot().Known && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s := x.Snapshot(); s.Known || !strings.Contains(s.Reason, "subscription failed") {
		t.Fatalf("after the publisher exited: known=%v reason %q, want unknown after a failed subscription", s.Known, s.Reason)
	}
	b := startLibzmqPublisher(t, "map", "kv", "--seed", "2", "--pub-port", port(t, a.Endpoint), "--replay-port", port(t, a.ReplayEndpoint))
	// The index still shows the old process's last sequence: wait for
	// the new one's, publishing meanwhile (Follow redials every 50 ms).
	var s state
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		s = b.do(t, "live 1")
		reachesWithin(x, s.Seq, 20*time.Millisecond)
		if got := x.Snapshot(); got.Known && got.Sequence == s.Seq {
			break
		}
		time.Sleep(5 * time.Millisecond) // pace: one batch per try
	}
	got := x.Snapshot()
	if !got.Known || got.Sequence != s.Seq || !slices.Equal(resident(got), s.Blocks) {
		t.Fatalf("after the restart: known=%v (%s) at %d with %v, want known at %d with %v", got.Known, got.Reason, got.Sequence, resident(got), s.Seq, s.Blocks)
	}
}

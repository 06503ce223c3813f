package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/etcdlease/etcdtest"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
)

// Routers sharing a lease in a real etcd (runtime.md §3.8 over
// recovery.lease.backend etcd), with a lease period short enough that the
// whole set runs in well under a minute.
const etcdTTL = 2 * time.Second

var etcdLeaseArgs = []string{"--lease-ttl", "2s", "--lease-renew-interval", "500ms", "--lease-safety-margin", "500ms"}

func newEtcdWorld(t *testing.T) (*world, *etcdtest.Server) {
	srv := etcdtest.Start(t)
	w := newWorld(t, func(c *fleet.Config) {
		c.Recovery.Lease = fleet.Lease{Backend: fleet.LeaseEtcd, EtcdEndpoints: srv.Endpoint(),
			EtcdKey: "/narwhal/test-" + strings.ToLower(t.Name()), KubernetesName: "narwhal-router"}
	})
	return w, srv
}

func (w *world) router(id string, args ...string) *proc {
	return w.start(freePort(w.t), append(append([]string{"--router-id", id}, etcdLeaseArgs...), args...)...)
}

// standbyOf starts a standby of p and waits for its first good probes.
func (w *world) standbyOf(p *proc, id string) *proc {
	s := w.router(id, "--standby-of", p.base)
	waitWarm(w.t, s, 1)
	if ready(s.base) {
		w.t.Fatal("the standby is ready while the primary serves")
	}
	return s
}

func waitReady(t *testing.T, p *proc, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for !ready(p.base) {
		if time.Since(start) > within {
			t.Fatalf("not ready within %v:\n%s", within, p.errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// Five times in a row the primary is SIGKILLed and its standby serves
// within two lease periods; the median is what docs/reliability.md reports.
func TestEtcdSIGKILLedPrimaryStandbyServes(t *testing.T) {
	w, _ := newEtcdWorld(t)
	primary := w.router("r0")
	waitReady(t, primary, 5*time.Second)
	var took []time.Duration
	for i := 1; i <= 5; i++ {
		standby := w.standbyOf(primary, fmt.Sprintf("r%d", i))
		primary.cmd.Process.Kill()
		primary.wait(t)
		d := waitReady(t, standby, 4*etcdTTL)
		if d > 2*etcdTTL {
			t.Errorf("takeover %d took %v, more than two lease periods (%v)", i, d, 2*etcdTTL)
		}
		if out, _, err := stream(t.Context(), standby.base, 4); err != nil || !strings.Contains(out, "[DONE]") {
			t.Fatalf("the new primary does not serve: %v %.200s", err, out)
		}
		took = append(took, d)
		primary = standby
	}
	slices.Sort(took)
	t.Logf("etcd takeover after SIGKILL (ttl %v, renew 500ms, margin 500ms): median %v of %v", etcdTTL, took[2], took)
}

// answer is one completion a router answered with 200.
type answer struct{ start, end time.Time }

// hammered counts a hammer's finished attempts and its answers as they
// happen, for the test to wait on.
type hammered struct{ tries, answers atomic.Int64 }

// hammer sends short completions to base until stop closes and returns
// those answered with 200. A request the client gave up on (1 s) is not
// an answer.
func hammer(base string, stop <-chan struct{}, n *hammered) []answer {
	c := &http.Client{Timeout: time.Second}
	var out []answer
	for {
		select {
		case <-stop:
			return out
		default:
		}
		start := time.Now()
		resp, err := c.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","max_tokens":2}`))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				out = append(out, answer{start, time.Now()})
				n.answers.Add(1)
			}
		}
		n.tries.Add(1)
		time.Sleep(10 * time.Millisecond) // pacing between requests, not a wait for a result
	}
}

// healthStatus is p's /health status word.
func healthStatus(t *testing.T, p *proc) string {
	var h struct{ Status string }
	readJSON(t, p.base+"/health", &h)
	return h.Status
}

// A primary paused (SIGSTOP) past its lease is fenced when it resumes: it
// never answers again, and no request it answered overlaps in time with
// one its successor answered.
func TestEtcdSIGSTOPPedPrimaryIsFencedOnResume(t *testing.T) {
	w, _ := newEtcdWorld(t)
	a := w.router("a")
	waitReady(t, a, 5*time.Second)
	b := w.standbyOf(a, "b")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	answers := make([][]answer, 2)
	counts := make([]hammered, 2)
	for i, p := range []*proc{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); answers[i] = hammer(p.base, stop, &counts[i]) }()
	}
	until(t, 5*time.Second, "the primary answers the hammer", func() bool { return counts[0].answers.Load() >= 5 })
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// A paused primary's /ready hangs until each probe's 1 s timeout, so
	// the standby needs longer here than after a kill. Once the standby
	// serves it holds the lease: etcd expired a's, and a's own clock
	// (ttl − margin after its last renewal) is past it too.
	took := waitReady(t, b, 5*etcdTTL)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed, tried := time.Now(), counts[0].tries.Load()
	// Twenty requests sent to the resumed primary, and it says fenced.
	until(t, 10*time.Second, "twenty tries at the resumed primary", func() bool { return counts[0].tries.Load() >= tried+20 })
	until(t, 5*time.Second, "the resumed primary fenced", func() bool { return healthStatus(t, a) == "fenced" })
	close(stop)
	wg.Wait()
	fromA, fromB := answers[0], answers[1]
	if len(fromA) == 0 || len(fromB) == 0 {
		t.Fatalf("answers: %d from the paused primary, %d from the standby; want both to have served", len(fromA), len(fromB))
	}
	lastA := fromA[len(fromA)-1]
	if lastA.end.After(resumed) {
		t.Errorf("the resumed primary answered at %v, after SIGCONT: it was not fenced", lastA.end.Sub(resumed))
	}
	if first := fromB[0]; !lastA.end.Before(first.start) {
		t.Errorf("split brain: the old primary answered until %v, the new one from %v", lastA.end.Format(time.StampMilli), first.start.Format(time.StampMilli))
	}
	if st := healthStatus(t, a); st != "fenced" || ready(a.base) {
		t.Errorf("resumed primary: /health %q, ready %v; want fenced and not ready", st, ready(a.base))
	}
	t.Logf("takeover %v after SIGSTOP; answers: %d by the old primary, %d by the new one", took, len(fromA), len(fromB))
}

// With etcd down both routers fence and neither serves; with etcd back
// exactly one primary serves again.
func TestEtcdOutageFencesBothThenOnePrimary(t *testing.T) {
	w, srv := newEtcdWorld(t)
	a := w.router("a")
	waitReady(t, a, 5*time.Second)
	b := w.standbyOf(a, "b")
	srv.Stop()
	// Past ttl − margin after its last renewal, a is fenced by its own
	// clock; from then on neither router may serve.
	until(t, 2*etcdTTL, "the primary fenced with etcd down", func() bool { return healthStatus(t, a) == "fenced" })
	for i := 0; i < 10; i++ {
		for _, p := range []*proc{a, b} {
			resp, err := http.Post(p.base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","max_tokens":2}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || ready(p.base) {
				t.Fatalf("%s served with etcd down (status %d)", p.base, resp.StatusCode)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	var goodsAtReturn int64
	if rd := readyDoc(t, b.base); rd.Standby != nil {
		goodsAtReturn = rd.Standby.GoodProbes
	}
	srv.Start()
	// One router claims and serves; the other has met the live store:
	// its claim refused because the lease is held (not because etcd is
	// away), or, still a standby, a good probe of the one serving.
	settled := func(rd routerdoc.Ready) bool {
		if rd.Standby != nil {
			return rd.Standby.Misses == 0 && rd.Standby.GoodProbes > goodsAtReturn
		}
		return strings.Contains(rd.Reason, "lease held by another router")
	}
	var loser *proc
	until(t, 5*etcdTTL, "one primary serving and the other settled behind it", func() bool {
		ra, rb := readyDoc(t, a.base), readyDoc(t, b.base)
		switch {
		case ra.Status == "ready" && rb.Status == "ready":
			t.Fatalf("split brain after etcd's return: both routers ready")
		case ra.Status == "ready" && settled(rb):
			loser = b
		case rb.Status == "ready" && settled(ra):
			loser = a
		}
		return loser != nil
	})
	if ready(loser.base) {
		t.Fatalf("after etcd's return: both routers ready; want exactly one primary\nloser: %+v", readyDoc(t, loser.base))
	}
}

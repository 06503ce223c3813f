package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/etcdlease/etcdtest"
	"github.com/narwhal-go/narwhal/internal/fleet"
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
	time.Sleep(700 * time.Millisecond)
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

// hammer sends short completions to base until stop closes and returns
// those answered with 200. A request the client gave up on (1 s) is not
// an answer.
func hammer(base string, stop <-chan struct{}) []answer {
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
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
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
	for i, p := range []*proc{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); answers[i] = hammer(p.base, stop) }()
	}
	time.Sleep(500 * time.Millisecond)
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	// A paused primary's /ready hangs until each probe's 1 s timeout, so
	// the standby needs longer here than after a kill.
	took := waitReady(t, b, 5*etcdTTL)
	time.Sleep(time.Until(paused.Add(2 * etcdTTL)))
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	time.Sleep(2 * time.Second)
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
	var h struct{ Status string }
	readJSON(t, a.base+"/health", &h)
	if h.Status != "fenced" || ready(a.base) {
		t.Errorf("resumed primary: /health %q, ready %v; want fenced and not ready", h.Status, ready(a.base))
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
	time.Sleep(etcdTTL) // past a's ttl − margin: fenced by its clock
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
	srv.Start()
	deadline := time.Now().Add(5 * etcdTTL)
	for !ready(a.base) && !ready(b.base) {
		if time.Now().After(deadline) {
			t.Fatalf("no primary within %v of etcd's return:\na: %s\nb: %s", 5*etcdTTL, a.errb.String(), b.errb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if ra, rb := ready(a.base), ready(b.base); ra == rb {
		t.Fatalf("after etcd's return: a ready %v, b ready %v; want exactly one primary", ra, rb)
	}
}

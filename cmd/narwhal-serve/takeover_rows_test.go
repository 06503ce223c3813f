package main

import (
	"context"
	"errors"

	"io"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/etcdlease/etcdtest"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
)

// Crash accounting through restarts and takeovers (issue 29, part 5):
// every admitted request ends with exactly one terminal row, whichever
// router writes it, across every file of the shared, rotated journal.

// rowsPerAdmission reads the whole journal set at path and returns, for
// every admitted rid, how many terminal rows it has, and the admissions
// per run.
func rowsPerAdmission(t *testing.T, path string) (map[string]int, map[string]int) {
	t.Helper()
	s, err := journal.OpenSet(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	admitted, terminal, perRun := map[string]bool{}, map[string]int{}, map[string]int{}
	for {
		rec, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("journal set %v: %v", s.Files(), err)
		}
		switch rec.Kind {
		case journal.KindAdmission:
			admitted[rec.Admission.RID] = true
			perRun[rec.Run]++
		case journal.KindRequest:
			terminal[rec.Request.RID]++
		}
	}
	out := map[string]int{}
	for rid := range admitted {
		out[rid] = terminal[rid]
	}
	return out, perRun
}

// openStreams opens n long streams at once and returns their rids; each
// keeps streaming until ctx ends.
func openStreams(t *testing.T, ctx context.Context, base string, n int) []string {
	t.Helper()
	var mu sync.Mutex
	var rids []string
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rid, err := openStream(ctx, base, 400)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || rid == "" {
				t.Errorf("stream: %v (rid %q)", err, rid)
				return
			}
			rids = append(rids, rid)
		}()
	}
	wg.Wait()
	return rids
}

// checkOneRowEach fails for every admitted request without exactly one
// terminal row, and for any of want that was not admitted.
func checkOneRowEach(t *testing.T, path string, want []string) {
	t.Helper()
	rows, perRun := rowsPerAdmission(t, path)
	bad := 0
	for rid, n := range rows {
		if n != 1 {
			bad++
			if bad <= 5 {
				t.Errorf("admitted request %s has %d terminal rows, want 1", rid, n)
			}
		}
	}
	for _, rid := range want {
		if _, ok := rows[rid]; !ok {
			t.Errorf("request %s streamed but has no admission record", rid)
		}
	}
	t.Logf("%d admitted requests over runs %v; %d without exactly one terminal row", len(rows), perRun, bad)
}

// A router killed well within its first monitor pass after a resume has
// already named its run in the handoff document (it writes it before its
// first admission), so the router after it closes that run's requests.
// Before, the document still named the run before, and the killed run's
// requests never got a row.
func TestKilledJustAfterResumeItsRequestsStillGetRows(t *testing.T) {
	w := newWorld(t, func(c *fleet.Config) { c.Controller.MonitorIntervalS = 5 })
	port := freePort(t)
	a := w.start(port)
	if _, _, err := stream(t.Context(), a.base, 4); err != nil {
		t.Fatal(err)
	}
	a.cmd.Process.Kill()
	a.wait(t)

	b := w.start(port, "--resume")
	ctx, cancel := context.WithCancel(t.Context())
	rids := openStreams(t, ctx, b.base, 20)
	b.cmd.Process.Kill() // long before b's first monitor pass
	b.wait(t)
	cancel()

	c := w.start(port, "--resume")
	defer c.cmd.Process.Kill()
	checkOneRowEach(t, filepath.Join(w.dir, "journal.jsonl"), rids)
}

// The must-hold of issue 29: the primary is killed with 50 streams in
// flight while the routers share a journal rotated at 4 KiB; the standby
// takes over and closes each of the old primary's requests with a
// router_lost row: every admitted request has exactly one terminal row.
// The killed primary's port refuses connections, so the standby does not
// wait out request_timeout_s (60 s here) first. File and etcd leases.
func TestTakeoverLeavesOneRowPerRequest(t *testing.T) {
	long := func(c *fleet.Config) { c.Serving.RequestTimeoutS, c.Serving.PrefillTimeoutS = 60, 60 }
	for _, backend := range []string{"file", "etcd"} {
		t.Run(backend, func(t *testing.T) {
			var w *world
			args := []string{"--journal-max-bytes", "4096", "--lease-ttl", "2s", "--lease-renew-interval", "500ms",
				"--lease-safety-margin", "500ms"}
			if backend == "etcd" {
				srv := etcdtest.Start(t)
				w = newWorld(t, func(c *fleet.Config) {
					long(c)
					c.Recovery.Lease = fleet.Lease{Backend: fleet.LeaseEtcd, EtcdEndpoints: srv.Endpoint(),
						EtcdKey: "/narwhal/rows", KubernetesName: "narwhal-router"}
				})
			} else {
				w = newWorld(t, long)
				args = append(args, "--lease-path", filepath.Join(w.dir, "router.lease"))
			}
			a := w.start(freePort(t), append(args, "--router-id", "a")...)
			waitReady(t, a, 5*time.Second)
			b := w.start(freePort(t), append(args, "--router-id", "b", "--standby-of", a.base)...)
			waitWarm(t, b, 1)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			rids := openStreams(t, ctx, a.base, 50)
			a.cmd.Process.Kill()
			a.wait(t)
			cancel()
			took := waitReady(t, b, 4*time.Second)
			for range 3 { // served by the new primary, journalled beside the old rows
				if _, _, err := stream(t.Context(), b.base, 4); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(w.dir, "journal.jsonl")
			start := time.Now()
			for time.Since(start) < 5*time.Second {
				if rows, _ := rowsPerAdmission(t, path); allOne(rows) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Logf("takeover in %v; old requests closed %v after it", took, time.Since(start))
			files, _ := journal.SetFiles(path)
			if len(files) < 3 {
				t.Errorf("journal set %v: want rotation at 4 KiB", files)
			}
			checkOneRowEach(t, path, rids)
			b.cmd.Process.Kill()
		})
	}
}

func allOne(rows map[string]int) bool {
	for _, n := range rows {
		if n != 1 {
			return false
		}
	}
	return len(rows) > 0
}

// A primary stopped past its lease (SIGSTOP) loses it to its standby;
// resumed, it stays fenced and keeps claiming. When the standby, now the
// primary, is killed with streams in flight, the old primary claims the
// lease back, adopts the handoff document its successor wrote and closes
// the successor's requests (once past request_timeout_s: that router
// might only be fenced): one row per request across all three runs.
func TestRouterThatClaimsBackClosesItsSuccessorsRequests(t *testing.T) {
	const timeout = 3
	w := newWorld(t, func(c *fleet.Config) { c.Serving.RequestTimeoutS, c.Serving.PrefillTimeoutS = timeout, timeout })
	args := []string{"--journal-max-bytes", "4096", "--lease-path", filepath.Join(w.dir, "router.lease"),
		"--lease-ttl", "2s", "--lease-renew-interval", "500ms", "--lease-safety-margin", "500ms"}
	a := w.start(freePort(t), append(args, "--router-id", "a")...)
	waitReady(t, a, 5*time.Second)
	b := w.start(freePort(t), append(args, "--router-id", "b", "--standby-of", a.base)...)
	waitWarm(t, b, 1)
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitReady(t, b, 6*time.Second)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	rids := openStreams(t, ctx, b.base, 20)
	if ready(a.base) {
		t.Fatal("the resumed old primary is ready while its successor holds the lease")
	}
	b.cmd.Process.Kill()
	b.wait(t)
	cancel()
	waitReady(t, a, 6*time.Second)
	path := filepath.Join(w.dir, "journal.jsonl")
	deadline := time.Now().Add(time.Duration(timeout+6) * time.Second)
	for time.Now().Before(deadline) {
		if rows, _ := rowsPerAdmission(t, path); allOne(rows) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	checkOneRowEach(t, path, rids)
	a.cmd.Process.Kill()
}

package takeover

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Changes made while a write runs coalesce into one more write, and
// Changed never waits for the write.
func TestWriterCoalescesChangesDuringAWrite(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var writes atomic.Int32
	w := NewWriter(func() error {
		if writes.Add(1) == 1 {
			close(entered)
			<-release
		}
		return nil
	}, nil)
	w.Changed()
	<-entered // the first write is running and blocked
	start := time.Now()
	for range 100 {
		w.Changed()
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("100 Changed calls during a write took %v; Changed must not wait", d)
	}
	close(release)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := writes.Load(); n != 2 {
		t.Errorf("%d writes for 101 changes, 100 of them during the first write; want 2", n)
	}
}

// Close returns only after the change made before it is written; a
// change after Close is not written. In a synctest bubble, so the slow
// disk is fake time and synctest.Wait says when every goroutine the
// writer could have started is idle.
func TestWriterFlushesOnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var writes atomic.Int32
		w := NewWriter(func() error {
			time.Sleep(20 * time.Millisecond) // a slow disk
			writes.Add(1)
			return nil
		}, nil)
		w.Changed()
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if n := writes.Load(); n != 1 {
			t.Fatalf("%d writes when Close returned, want the pending one written", n)
		}
		w.Changed()
		time.Sleep(time.Second) // fake: any write started would finish
		synctest.Wait()
		if n := writes.Load(); n != 1 {
			t.Errorf("a change after Close was written (%d writes); the writer is stopped", n)
		}
	})
}

// A background write's error is logged, kept for Err and returned by
// Close; a later successful write clears it.
func TestWriterLogsAndKeepsErrors(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex // guards buf against the writer goroutine
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil)).With("path", "/x/state.json")
	fail := atomic.Bool{}
	fail.Store(true)
	w := NewWriter(func() error {
		if fail.Load() {
			return errors.New("disk full")
		}
		return nil
	}, log)
	w.Changed()
	eventually(t, "the failed write", func() bool { return w.Err() != nil })
	mu.Lock()
	logged := buf.String()
	mu.Unlock()
	if !strings.Contains(logged, "writing the handoff document failed") || !strings.Contains(logged, "disk full") ||
		!strings.Contains(logged, "path=/x/state.json") {
		t.Errorf("log %q: want the failure with its error and path", logged)
	}
	fail.Store(false)
	if err := w.Flush(); err != nil || w.Err() != nil {
		t.Errorf("after a good write: Flush %v, Err %v; want nil", err, w.Err())
	}
	fail.Store(true)
	w.Changed()
	if err := w.Close(); err == nil || err.Error() != "disk full" {
		t.Errorf("Close after a failed pending write: %v, want disk full", err)
	}
}

// A Flush and the background write never run write at the same time.
func TestWriterSerialisesWrites(t *testing.T) {
	var running, overlaps, writes atomic.Int32
	w := NewWriter(func() error {
		if running.Add(1) > 1 {
			overlaps.Add(1)
		}
		time.Sleep(time.Millisecond)
		running.Add(-1)
		writes.Add(1)
		return nil
	}, nil)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				w.Changed()
				_ = w.Flush()
			}
		}()
	}
	wg.Wait()
	_ = w.Close()
	if overlaps.Load() != 0 || writes.Load() < 40 {
		t.Errorf("%d overlapping writes of %d, want none of at least 40", overlaps.Load(), writes.Load())
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

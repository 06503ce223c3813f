package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
)

// gateWriter blocks its first Write after arm until release is closed,
// and counts Writes.
type gateWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	writes  int
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	armed := g.armed
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(g.entered)
		<-g.release
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.writes++
	return g.buf.Write(p)
}

func (w *Writer) queuedLines() int {
	n := 0
	for q := w.queue.Load(); q != nil; q = q.next {
		n += bytes.Count(q.line, []byte{'\n'})
	}
	return n
}

// While one batch is being written, every other row joins the next
// batch: 64 rows cost two Writes, and every row lands whole. Admission
// records and terminal rows share the commit.
func TestRowsGroupCommit(t *testing.T) {
	const n = 64
	for _, c := range []struct {
		name  string
		write func(w *Writer, i int) error
		check func(j *Journal, w *Writer) error
	}{
		{"admission records", func(w *Writer, i int) error {
			return w.Admitted(Admission{RID: fmt.Sprintf("r%02d", i), Arrived: float64(i), Endpoint: "/v1/completions"})
		}, func(j *Journal, w *Writer) error {
			if len(j.Admissions) != n || len(j.Events) != 0 {
				return fmt.Errorf("%d admission records and %d events read back, want %d and 0", len(j.Admissions), len(j.Events), n)
			}
			if a := j.Admissions[0].Admission; a.RID != "r00" || a.Endpoint != "/v1/completions" || j.Admissions[0].Run != w.Run() {
				return fmt.Errorf("first record %+v run %s", a, j.Admissions[0].Run)
			}
			return nil
		}},
		{"terminal rows", func(w *Writer, i int) error {
			return w.Request(completed(fmt.Sprintf("r%02d", i)))
		}, func(j *Journal, w *Writer) error {
			if len(j.Requests) != n || j.Requests[0].Request.RID != "r00" || j.Requests[0].Run != w.Run() {
				return fmt.Errorf("%d request rows read back, want %d starting with r00 of run %s", len(j.Requests), n, w.Run())
			}
			return nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := &gateWriter{entered: make(chan struct{}), release: make(chan struct{})}
			w, err := New(g, testOpts(1))
			if err != nil {
				t.Fatal(err)
			}
			g.mu.Lock()
			g.armed, g.writes = true, 0
			g.mu.Unlock()
			errs := make(chan error, n)
			write := func(i int) { errs <- c.write(w, i) }
			go write(0)
			<-g.entered // the first batch is mid-Write
			for i := 1; i < n; i++ {
				go write(i)
			}
			deadline := time.Now().Add(10 * time.Second)
			for w.queuedLines() < n-1 {
				if time.Now().After(deadline) {
					t.Fatalf("only %d of %d rows queued behind the first write", w.queuedLines(), n-1)
				}
				time.Sleep(time.Millisecond)
			}
			close(g.release)
			for range n {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if g.writes != 2 {
				t.Errorf("%d Write calls for %d rows, want 2 (one per batch)", g.writes, n)
			}
			j, err := ReadAll(strings.NewReader(g.buf.String()))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.check(j, w); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestAdmittedAfterCloseFails(t *testing.T) {
	w, _ := openTemp(t, 1)
	w.Close()
	if err := w.Admitted(Admission{RID: "r1"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("admission after Close: %v, want ErrClosed", err)
	}
	if err := w.Admitted(Admission{}); err == nil || !strings.Contains(err.Error(), "empty rid") {
		t.Fatalf("admission without rid: %v", err)
	}
}

// A router killed mid-run leaves admissions without terminal rows; a
// later run may already have closed some of them.
func TestScanRunFindsLostRequests(t *testing.T) {
	old, path := openTemp(t, 1)
	for _, rid := range []string{"a", "b", "c", "d"} {
		if err := old.Admitted(Admission{RID: rid, Arrived: float64(len(rid))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Request(completed("a")); err != nil {
		t.Fatal(err)
	}
	old.Close()
	// A torn row of the old run, then a later run that closed "d".
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, `{"schema":"narwhal.journal","schema_version":1,"run":%q,"rid":"x","termi`, old.Run())
	f.Close()
	later, err := Open(path, testOpts(2))
	if err != nil {
		t.Fatal(err)
	}
	lost := completed("d")
	lost.Terminal, lost.Reason = TerminalFailed, Ptr(string(fault.RouterLost))
	if err := later.Request(lost); err != nil {
		t.Fatal(err)
	}
	if err := later.Admitted(Admission{RID: "z"}); err != nil {
		t.Fatal(err)
	}
	later.Close()

	tail, err := ScanRun(path, old.Run())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range tail.Lost() {
		got = append(got, a.RID)
	}
	if strings.Join(got, ",") != "b,c" {
		t.Errorf("lost %v, want [b c]: a completed, d closed by the later run, z is the later run's", got)
	}
	if len(tail.Rows) != 1 || tail.Rows[0].RID != "a" || tail.Damaged != 1 || tail.Truncated {
		t.Errorf("rows %d, damaged %d (line %d), truncated %v; want 1 row, the torn line counted once",
			len(tail.Rows), tail.Damaged, tail.FirstDamaged, tail.Truncated)
	}
}

// Opening a journal whose last row was torn ends that row first, so the
// new meta row is not glued onto it.
func TestOpenEndsATornLine(t *testing.T) {
	w, path := openTemp(t, 1)
	w.Close()
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"schema":"narwhal.journal","schema_version":1,"run":"x","ri`)
	f.Close()
	w2, err := Open(path, testOpts(2))
	if err != nil {
		t.Fatal(err)
	}
	w2.Close()
	ls := lines(t, path)
	if len(ls) != 3 || !strings.HasPrefix(ls[2], `{"meta":`) {
		t.Fatalf("lines after reopening a torn journal:\n%s", strings.Join(ls, "\n"))
	}
}

// BenchmarkAdmitted measures an admission record against a terminal row
// written the same way, both from parallel goroutines into a real file.
func BenchmarkAdmitted(b *testing.B) {
	for _, kind := range []string{"admission", "terminal-row"} {
		b.Run(kind, func(b *testing.B) {
			w, err := Open(b.TempDir()+"/j.jsonl", testOpts(1))
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if kind == "admission" {
						err = w.Admitted(Admission{RID: "0123456789abcdef0123456789abcdef", Arrived: 12.5, Endpoint: "/v1/chat/completions"})
					} else {
						err = w.Request(completed("0123456789abcdef0123456789abcdef"))
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

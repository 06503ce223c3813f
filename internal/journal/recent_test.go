package journal

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
)

// The writer keeps the latest rows that did not complete, newest first,
// bounded by RecentLimit; completed rows never enter.
func TestRecentFailures(t *testing.T) {
	var buf bytes.Buffer
	w, err := New(&buf, testOpts(1))
	if err != nil {
		t.Fatal(err)
	}
	if got := w.RecentFailures(); len(got) != 0 {
		t.Fatalf("fresh writer holds %d rows", len(got))
	}
	for i := 0; i < RecentLimit+5; i++ {
		if err := w.Request(completed(fmt.Sprintf("ok%d", i))); err != nil {
			t.Fatal(err)
		}
		row := &RequestRow{RID: fmt.Sprintf("f%d", i), Terminal: TerminalFailed, Reason: Ptr(string(fault.NoEngine)), Status: Ptr(503)}
		if err := w.Request(row); err != nil {
			t.Fatal(err)
		}
	}
	got := w.RecentFailures()
	if len(got) != RecentLimit {
		t.Fatalf("%d rows kept, want %d", len(got), RecentLimit)
	}
	for i, row := range got {
		if want := fmt.Sprintf("f%d", RecentLimit+4-i); row.RID != want {
			t.Fatalf("row %d is %s, want %s (newest first)", i, row.RID, want)
		}
	}
}

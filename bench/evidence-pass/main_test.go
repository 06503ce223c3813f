package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// The verdict fails a pass that read more than was appended, an idle pass
// that read anything, an RSS over the bound and a pass that errs.
func TestReportVerdict(t *testing.T) {
	o := options{window: time.Minute, rate: 1, rssBound: 64}
	good := []passResult{{name: "first", bytes: 100, rows: 2, appended: -1, peakMiB: 20},
		{name: "after", bytes: 50, rows: 1, appended: 50, peakMiB: 21}, {name: "idle", appended: 0, peakMiB: 21}}
	cases := []struct {
		name string
		mod  func([]passResult)
		want string
	}{
		{"all good", func([]passResult) {}, "ok:"},
		{"re-read old bytes", func(r []passResult) { r[1].bytes = 150 }, "read 150 bytes, 50 were appended"},
		{"idle pass read", func(r []passResult) { r[2].bytes = 10 }, "idle: read 10 bytes, 0 were appended"},
		{"over the bound", func(r []passResult) { r[1].peakMiB = 80 }, "peak RSS 80.0 MiB over the 64 MiB bound"},
		{"serving error", func(r []passResult) { r[0].servingErr = "no accepted request" }, `serving error "no accepted request"`},
	}
	for _, c := range cases {
		rs := append([]passResult(nil), good...)
		c.mod(rs)
		var b bytes.Buffer
		code := report(&b, rs, o)
		if !strings.Contains(b.String(), c.want) || (code == 0) != (c.want == "ok:") {
			t.Errorf("%s: exit %d\n%s\nwant %q", c.name, code, b.String(), c.want)
		}
	}
}

// A small journal end to end, in this process: every pass after the
// first reads only what was appended, and none errs.
func TestPassesOnASmallJournal(t *testing.T) {
	dir := t.TempDir()
	o := options{mib: 4, rate: 100, window: time.Minute, appends: []int{500, 2000}, rssBound: 1 << 20, dir: dir}
	rows, err := generate(dir, o)
	if err != nil || rows < 1000 {
		t.Fatalf("generate: %d rows, %v", rows, err)
	}
	o.rows = rows
	if code := measure(o); code != 0 {
		t.Fatalf("measure exited %d", code)
	}
}

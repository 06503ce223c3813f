package serving

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/ports"
)

func bindings() []Binding {
	return []Binding{{IID: "p0", Endpoint: "fpP", BootRecord: bootA, ObservedAt: "2026-01-01T00:00:01Z"},
		{IID: "d0", Endpoint: "fpD", BootRecord: bootB, ObservedAt: "2026-01-01T00:00:01Z"}}
}

// offers is the Offered count per endpoint fingerprint in the window's
// records.
func offers(t *testing.T, w *Window, bs []Binding) map[string]int {
	t.Helper()
	res, err := Records(Input{Windows: []*Window{w}, Bindings: bs, Request: request(), RequestDigest: reqD}, ports.NewFake(time.Unix(0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range res.Records {
		out[r.Subject[evidence.SubjectEndpoint]] = int(r.Display["serving"].(map[string]any)["offered"].(float64))
	}
	return out
}

// Which fingerprints a row counts against, and which rows are in the
// window.
func TestWindowCountsEachRowWhereItBelongs(t *testing.T) {
	refused := Row{Run: "r1", TTFT: math.NaN(), TPOT: math.NaN(), WantedLen: -1, OutLen: -1, Terminal: journal.TerminalRefused}
	served := Row{Run: "r1", Prefill: "p0", Terminal: journal.TerminalCompleted}
	cases := []struct {
		name  string
		rows  []Row
		width time.Duration
		want  string
	}{
		{"both legs", []Row{{Run: "r1", Prefill: "p0", Decode: "d0", Terminal: journal.TerminalCompleted}}, 0, "map[fpD:1 fpP:1]"},
		{"a refusal counts against the fingerprints that served, not an idle one", []Row{served, refused}, 0, "map[fpP:2]"},
		{"nothing placed: the fleet's fingerprints carry the refusals", []Row{refused, refused}, 0, "map[fpD:2 fpP:2]"},
		{"an engine outside the fleet counts for none", []Row{{Run: "r1", Prefill: "zz", Terminal: journal.TerminalFailed}}, 0, "map[]"},
		{"the client's own mistake is no offer", []Row{{Run: "r1", Terminal: journal.TerminalInvalid}}, 0, "map[]"},
		{"only the last width of a run", []Row{{Run: "r1", Arrived: 0, Prefill: "p0"}, {Run: "r1", Arrived: 5, Prefill: "p0"},
			{Run: "r1", Arrived: 20, Prefill: "p0"}}, 15 * time.Second, "map[fpP:2]"},
		{"each run its own window", []Row{{Run: "r1", Arrived: 100, Prefill: "p0"}, {Run: "r2", Arrived: 1, Prefill: "p0"},
			{Run: "r1", Arrived: 0, Prefill: "p0"}}, 10 * time.Second, "map[fpP:2]"},
	}
	for _, c := range cases {
		w := NewWindow([]string{"p0", "d0"}, c.width)
		for _, r := range c.rows {
			w.Request(r)
		}
		if got := fmt.Sprint(offers(t, w, bindings())); got != c.want {
			t.Errorf("%s: offers %s, want %s", c.name, got, c.want)
		}
	}
}

// Replicas of one fingerprint make one record: a request counts once
// however many of them it touched, each replica's share is shown, and
// replicas whose own verdicts differ are named in a note (not decided by
// iid or by which record was stamped last).
func TestReplicasOfOneFingerprintCombine(t *testing.T) {
	bs := []Binding{{IID: "p0", Endpoint: "fpS", BootRecord: bootA, ObservedAt: "2026-01-01T00:00:01Z"},
		{IID: "p1", Endpoint: "fpS", BootRecord: bootB, ObservedAt: "2026-01-01T00:00:02Z"},
		{IID: "d0", Endpoint: "fpS", BootRecord: bootA, ObservedAt: "2026-01-01T00:00:01Z"}}
	w := NewWindow([]string{"p0", "p1", "d0"}, 0)
	for i := range 30 {
		fast, slow := row(float64(i), 0.1, "p0"), row(float64(i), 5, "p1") // p1's requests miss the TTFT
		fast.Decode, slow.Decode = "d0", "d0"
		w.Request(fast)
		w.Request(slow)
	}
	w.Request(Row{Run: "r1", Arrived: 40, TTFT: math.NaN(), TPOT: math.NaN(), WantedLen: -1, OutLen: -1, Terminal: journal.TerminalRefused})
	res, err := Records(Input{Windows: []*Window{w}, Bindings: bs, Request: request(), RequestDigest: reqD}, ports.NewFake(time.Unix(0, 0)))
	if err != nil || len(res.Records) != 1 {
		t.Fatalf("records %d (err %v), want one for the fingerprint", len(res.Records), err)
	}
	d := res.Records[0].Display
	if got := d["serving"].(map[string]any)["offered"].(float64); got != 61 {
		t.Fatalf("offered %v, want 61: 60 placed once each and the refusal", got)
	}
	per := d["per_engine"].(map[string]any)
	if len(per) != 3 || per["d0"].(map[string]any)["offered"].(float64) != 60 || per["p1"].(map[string]any)["verdict"] != VerdictMissesSLO ||
		per["p0"].(map[string]any)["verdict"] != "meets_slo" {
		t.Fatalf("per_engine %v", per)
	}
	if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "replicas disagree") || !strings.Contains(res.Notes[0], "p1 misses_slo") {
		t.Fatalf("notes %v, want the disagreeing replicas named", res.Notes)
	}
}

// A window fed in pieces, dropping rows as it moves, makes the records a
// window fed everything at once makes; and it holds about the window's
// rows, not the journal's.
func TestWindowDropsWhatLeftItAndKeepsTheRecords(t *testing.T) {
	const n, width = 50_000, 100 * time.Second
	whole := NewWindow([]string{"p0", "d0"}, width)
	whole.compactAt = math.MaxInt // never drops: the reference
	moving := NewWindow([]string{"p0", "d0"}, width)
	for i := range n {
		at := float64(i) / 10 // 10 rows a second: the window holds 1,000
		r := Row{Run: "r1", Arrived: at, TTFT: 0.1 + float64(i%7)/10, TPOT: 0.01 * float64(i%9), InputLen: 10 + i%50,
			WantedLen: 8, OutLen: 8 - i%3, Terminal: journal.TerminalCompleted, Prefill: "p0", Decode: "d0"}
		if i == n/2 {
			whole.Exclusion("p0", 0, 500)
			moving.Exclusion("p0", 0, 500)
		}
		whole.Request(r)
		moving.Request(r)
	}
	if moving.Rows() > 2*minCompact+1000 || whole.Rows() != n {
		t.Fatalf("the moving window holds %d rows (want about %d), the reference %d", moving.Rows(), 2*minCompact, whole.Rows())
	}
	bs := append(bindings(), Binding{IID: "p0", ProcessStart: 500, Endpoint: "fpP2", BootRecord: bootA, ObservedAt: "2026-01-01T00:00:02Z"})
	in := func(w *Window) Input {
		return Input{Windows: []*Window{w}, Bindings: bs, Request: request(), RequestDigest: reqD}
	}
	clock := ports.NewFake(time.Unix(0, 0))
	a, errA := Records(in(whole), clock)
	b, errB := Records(in(moving), clock)
	if errA != nil || errB != nil || len(a.Records) != 2 || len(b.Records) != 2 || a.Records[1].Subject[evidence.SubjectEndpoint] != "fpP2" {
		t.Fatalf("records %d and %d (notes %v), errs %v %v", len(a.Records), len(b.Records), a.Notes, errA, errB)
	}
	for i := range a.Records {
		if fmt.Sprint(a.Records[i].Display) != fmt.Sprint(b.Records[i].Display) || a.Records[i].Subject[evidence.SubjectWindow] != b.Records[i].Subject[evidence.SubjectWindow] {
			t.Fatalf("record %d differs:\n%v\n%v", i, a.Records[i].Display, b.Records[i].Display)
		}
	}
}

// The router's window is wall-clock time across runs: a run served
// before a restart leaves it as time moves on, where each run's own
// window would keep its last part for ever. A run id that does not
// carry its start keeps its own window.
func TestWallWindowLetsOldRunsGo(t *testing.T) {
	feed := func(w *Window) map[string]int {
		for _, run := range []struct {
			id   string
			from float64
		}{{"1000-0000000a", 0}, {"2000-0000000b", 0}, {"handmade", 500}} {
			for i := range 50 {
				w.Request(Row{Run: run.id, Arrived: run.from + float64(i), TTFT: 0.1, TPOT: math.NaN(), WantedLen: -1, OutLen: -1,
					Terminal: journal.TerminalCompleted, Prefill: "p0"})
			}
		}
		return offers(t, w, bindings())
	}
	if got := feed(NewWindow([]string{"p0", "d0"}, 10*time.Second))["fpP"]; got != 33 {
		t.Fatalf("per-run windows: %d offers, want 11 from each of the three runs", got)
	}
	if got := feed(NewWallWindow([]string{"p0", "d0"}, 10*time.Second))["fpP"]; got != 22 {
		t.Fatalf("wall window: %d offers, want 11 from the latest run and 11 from the one without a start", got)
	}
}

package residency

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/kvevents"
)

func stored(bs int, parent *uint64, hs ...uint64) kvevents.Event {
	return kvevents.Event{Kind: kvevents.KindStored, Hashes: hs, Parent: parent, BlockSize: bs, TokenIDs: make([]int, bs*len(hs))}
}

func removed(hs ...uint64) kvevents.Event {
	return kvevents.Event{Kind: kvevents.KindRemoved, Hashes: hs}
}

func batch(evs ...kvevents.Event) kvevents.Batch { return kvevents.Batch{Events: evs} }

func TestIndexKnownAndLost(t *testing.T) {
	x := NewIndex("ep", 1, nil)
	if x.Snapshot().Known {
		t.Fatal("known before the subscription began")
	}
	x.Begin(true)
	x.Apply(0, batch(stored(16, nil, 1, 2, 3)))
	x.Apply(1, batch(removed(2)))
	s := x.Snapshot()
	if !s.Known || s.Sequence != 1 || s.BlockSize != 16 || len(s.Groups) != 1 || fmt.Sprint(s.Groups[0].Identities) != "[1 3]" {
		t.Fatalf("snapshot %+v", s)
	}
	ev, ok := x.Since(0)
	if !ok || len(ev.Changes) != 1 || fmt.Sprint(ev.Changes[0].Groups["0"].Removed) != "[2]" {
		t.Fatalf("since 0: %+v %v", ev, ok)
	}
	if _, ok := x.Since(5); ok {
		t.Error("since a sequence ahead of the index: want resynchronise")
	}
	x.Gap(2, 4)
	if s := x.Snapshot(); s.Known || len(s.Groups) != 0 || !strings.Contains(s.Reason, "gap") {
		t.Fatalf("after a gap: %+v", s)
	}
	if _, ok := x.Since(1); ok {
		t.Error("events served while residency is unknown")
	}
	x.Apply(4, batch(stored(16, nil, 9), kvevents.Event{Kind: kvevents.KindCleared}, stored(16, nil, 7)))
	if s := x.Snapshot(); !s.Known || fmt.Sprint(s.Groups[0].Identities) != "[7]" {
		t.Fatalf("after a cache reset: %+v", s)
	}
	if _, ok := x.Since(1); ok {
		t.Error("changes before the reset are gone: want resynchronise")
	}
	if ev, ok := x.Since(3); !ok || len(ev.Changes) != 1 || !ev.Changes[0].Cleared {
		t.Errorf("since 3: %+v %v, want the clearing change", ev, ok)
	}
}

func TestIndexRefusesWhatItCannotTrust(t *testing.T) {
	h, _ := kvevents.NewHasher(kvevents.SHA256, 2, "0")
	toks := []int{5, 6}
	good := h.Block(h.NoneHash(), toks).External()
	cases := []struct {
		name string
		evs  []kvevents.Event
		want string
	}{
		{"two block sizes", []kvevents.Event{stored(16, nil, 1), stored(32, nil, 2)}, "different block sizes"},
		{"another seed", []kvevents.Event{{Kind: kvevents.KindStored, Hashes: []uint64{good + 1}, TokenIDs: toks, BlockSize: 2}}, "hash"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := NewIndex("ep", 1, h)
			x.Begin(true)
			x.Apply(0, batch(tc.evs...))
			if s := x.Snapshot(); s.Known || !strings.Contains(s.Reason, tc.want) {
				t.Errorf("known %v reason %q, want unknown with %q", s.Known, s.Reason, tc.want)
			}
		})
	}
	x := NewIndex("ep", 1, h)
	x.Begin(true)
	x.Apply(0, batch(kvevents.Event{Kind: kvevents.KindStored, Hashes: []uint64{good}, TokenIDs: toks, BlockSize: 2}))
	if !x.Snapshot().Known {
		t.Errorf("a correctly seeded first block made residency unknown: %s", x.Snapshot().Reason)
	}
	x.limit = 2
	parent := good
	x.Apply(1, batch(stored(2, &parent, 10, 11)))
	if s := x.Snapshot(); s.Known || !strings.Contains(s.Reason, "larger than") {
		t.Errorf("over the limit: %+v", s)
	}
}

func snapWith(epoch string, seq int64, ids ...uint64) Snapshot {
	h, _ := kvevents.NewHasher(kvevents.SHA256, 2, "0")
	none := h.NoneHash()
	return Snapshot{Known: true, Sequence: seq, BlockSize: 2, Epoch: epoch, Groups: []GroupSnap{{Group: "0", Identities: ids}},
		Hashing: &Hashing{Algo: "sha256", NoneHash: fmt.Sprintf("%x", none[:])}}
}

func TestViewCachedTokensFollowChanges(t *testing.T) {
	h, _ := kvevents.NewHasher(kvevents.SHA256, 2, "0")
	prompt := []int{1, 2, 3, 4, 5, 6, 7}
	hs := h.Externals(prompt)
	v := NewView(10)
	if _, ok := v.CachedTokens(prompt); ok {
		t.Fatal("an unread view claims residency")
	}
	v.Reset(snapWith("e1", 3, hs[0], hs[1]))
	if n, ok := v.CachedTokens(prompt); !ok || n != 4 {
		t.Fatalf("cached %d %v, want the 4 tokens of two resident blocks", n, ok)
	}
	v.Apply(Events{Epoch: "e1", Sequence: 4, Changes: []Change{{Sequence: 4, Groups: map[string]GroupChange{"0": {Stored: []uint64{hs[2]}, Removed: []uint64{hs[0]}}}}}})
	if n, _ := v.CachedTokens(prompt); n != 0 {
		t.Errorf("first block removed: cached %d, want 0 (a prefix needs its first block)", n)
	}
	v.Apply(Events{Epoch: "e1", Sequence: 5, Changes: []Change{{Sequence: 5, Groups: map[string]GroupChange{"0": {Stored: []uint64{hs[0]}}}}}})
	if n, _ := v.CachedTokens(prompt); n != 6 {
		t.Errorf("three blocks resident of a 7-token prompt: cached %d, want 6", n)
	}
	if v.Apply(Events{Epoch: "e2", Sequence: 6}) || v.Known {
		t.Error("a new sidecar epoch was applied as a continuation")
	}
	big := make([]uint64, 11)
	for i := range big {
		big[i] = uint64(100 + i)
	}
	v.Reset(snapWith("e3", 1, big...))
	if v.Known || !strings.Contains(v.Reason, "limit") {
		t.Errorf("a snapshot over the view's limit: known %v reason %q", v.Known, v.Reason)
	}
}

// fakeSidecar serves an index's routes the way attest does (without the
// identity gate).
func fakeSidecar(t *testing.T, x *Index) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/residency", func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(x.Snapshot()) })
	mux.HandleFunc("GET /v1/residency/events", func(w http.ResponseWriter, r *http.Request) {
		after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
		ev, ok := x.Since(after)
		if !ok {
			w.WriteHeader(http.StatusGone)
			return
		}
		_ = json.NewEncoder(w).Encode(ev)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func TestTrackerFollowsAndResynchronises(t *testing.T) {
	h, _ := kvevents.NewHasher(kvevents.SHA256, 2, "0")
	prompt := []int{1, 2, 3, 4, 5}
	hs := h.Externals(prompt)
	x := NewIndex("ep", 1, h)
	x.Begin(true)
	side := fakeSidecar(t, x)
	missing := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(missing.Close)
	tr := NewTracker([]Source{{"a", side.URL + "/v1/residency"}, {"b", missing.URL + "/v1/residency"}}, 0, 2*time.Second)
	defer tr.Close()
	ctx := context.Background()
	tr.Refresh(ctx)
	x.Apply(0, batch(kvevents.Event{Kind: kvevents.KindStored, Hashes: hs, TokenIDs: prompt[:4], BlockSize: 2}))
	tr.Refresh(ctx)
	ev := tr.Cached(prompt, nil)
	if ev.Cached["a"] != 4 || ev.Sequence["a"] != 0 {
		t.Fatalf("evidence %+v, want a: 4 tokens at sequence 0", ev)
	}
	if _, ok := ev.Cached["b"]; ok || tr.State()["b"].Reason != NoEventsError {
		t.Errorf("b (404) has evidence or reason %q", tr.State()["b"].Reason)
	}
	x.Gap(1, 3) // the sidecar lost history: 410, then an unknown snapshot
	tr.Refresh(ctx)
	if _, ok := tr.Cached(prompt, nil).Cached["a"]; ok {
		t.Error("evidence survived the sidecar losing residency")
	}
	x.Apply(3, batch(kvevents.Event{Kind: kvevents.KindCleared}))
	tr.Refresh(ctx)
	if st := tr.State()["a"]; !st.Known || st.Resyncs < 2 {
		t.Errorf("after the reset: %+v, want known again by a fresh snapshot", st)
	}
}

func TestURLFromAttestation(t *testing.T) {
	if got := URLFromAttestation("http://h:8010/v1/attestation"); got != "http://h:8010/v1/residency" {
		t.Errorf("got %q", got)
	}
	if got := URLFromAttestation("http://h:8010/other"); got != "" {
		t.Errorf("got %q for a URL that is not an attestation route", got)
	}
}

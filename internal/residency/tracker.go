package residency

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Source is one engine's sidecar residency route, e.g.
// http://host:8010/v1/residency.
type Source struct {
	IID string
	URL string
}

// URLFromAttestation derives the residency route from an engine's
// attestation_url (…/v1/attestation → …/v1/residency); "" when it has none.
func URLFromAttestation(att string) string {
	base, ok := strings.CutSuffix(att, "/v1/attestation")
	if !ok || base == "" {
		return ""
	}
	return base + "/v1/residency"
}

// Tracker keeps the router's residency views, one per engine, from their
// sidecars. Refresh is its one writer; Cached and State read.
type Tracker struct {
	client  *http.Client
	sources []Source

	mu    sync.Mutex // guards views
	views map[string]*View
}

// NewTracker builds unknown views for sources with at most limit blocks
// each; timeout bounds each sidecar read.
func NewTracker(sources []Source, limit int, timeout time.Duration) *Tracker {
	t := &Tracker{client: &http.Client{Timeout: timeout}, sources: sources, views: map[string]*View{}}
	for _, s := range sources {
		t.views[s.IID] = NewView(limit)
	}
	return t
}

// Close releases idle connections.
func (t *Tracker) Close() { t.client.CloseIdleConnections() }

// Refresh reads every sidecar once, in parallel (a slow sidecar delays no
// other engine's view): the changes since the view's sequence, or a fresh
// snapshot when the view is unknown or the sidecar says to resynchronise.
// A failed read loses that engine's residency.
func (t *Tracker) Refresh(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range t.sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.refreshOne(ctx, s)
		}()
	}
	wg.Wait()
}

func (t *Tracker) refreshOne(ctx context.Context, s Source) {
	t.mu.Lock()
	v := t.views[s.IID]
	known, seq := v.Known, v.Sequence
	t.mu.Unlock()
	if known {
		var ev Events
		code, err := t.get(ctx, s.URL+"/events?after="+strconv.FormatInt(seq, 10), &ev)
		if err == nil && code == http.StatusOK {
			t.mu.Lock()
			ok := v.Apply(ev)
			t.mu.Unlock()
			if ok {
				return
			}
		} else if code != http.StatusGone {
			t.lose(v, code, err)
			return
		}
	}
	var snap Snapshot
	code, err := t.get(ctx, s.URL, &snap)
	if err != nil || code != http.StatusOK {
		t.lose(v, code, err)
		return
	}
	t.mu.Lock()
	v.Reset(snap)
	t.mu.Unlock()
}

func (t *Tracker) lose(v *View, code int, err error) {
	reason := NoEventsError
	switch {
	case err != nil:
		reason = "residency read failed: " + err.Error()
	case code != http.StatusNotFound:
		reason = fmt.Sprintf("residency read answered HTTP %d", code)
	}
	t.mu.Lock()
	v.Lose(reason)
	t.mu.Unlock()
}

func (t *Tracker) get(ctx context.Context, url string, into any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return resp.StatusCode, nil
	}
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(into)
}

// Evidence is the cached tokens of a prompt on every engine whose
// residency is known, and the sequence each view stood at.
type Evidence struct {
	Cached   map[string]int
	Sequence map[string]int64
}

// Hashes memoises a prompt's block hashes per engine hashing
// configuration, so looking one prompt up again hashes nothing.
type Hashes map[hashKey][]uint64

// Cached looks a tokenized prompt up in every known view; hashed (nil: a
// fresh one) keeps the prompt's block hashes for the next look-up.
func (t *Tracker) Cached(tokens []int, hashed Hashes) Evidence {
	ev := Evidence{Cached: map[string]int{}, Sequence: map[string]int64{}}
	if hashed == nil {
		hashed = Hashes{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for iid, v := range t.views {
		k, ok := v.key()
		if !ok {
			continue
		}
		hs, done := hashed[k]
		if !done {
			hs = blockHashes(k, tokens)
			hashed[k] = hs
		}
		ev.Cached[iid], ev.Sequence[iid] = v.prefix(hs)*k.bs, v.Sequence
	}
	return ev
}

// EngineState is one engine's row of the state document's residency map.
type EngineState struct {
	Known          bool           `json:"known"`
	Reason         string         `json:"reason"`
	Epoch          string         `json:"epoch"`
	Sequence       int64          `json:"sequence"`
	BlockSize      int            `json:"block_size"`
	ResidentBlocks map[string]int `json:"resident_blocks"`
	Resyncs        int            `json:"resyncs"`
}

// State is every view's summary, by iid.
func (t *Tracker) State() map[string]EngineState {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]EngineState{}
	for iid, v := range t.views {
		out[iid] = EngineState{Known: v.Known, Reason: v.Reason, Epoch: v.Epoch, Sequence: v.Sequence,
			BlockSize: v.BlockSize, ResidentBlocks: map[string]int{Group: v.Blocks()}, Resyncs: v.Resyncs}
	}
	return out
}

// IIDs is the tracked engines, sorted.
func (t *Tracker) IIDs() []string {
	out := make([]string, 0, len(t.sources))
	for _, s := range t.sources {
		out = append(out, s.IID)
	}
	slices.Sort(out)
	return out
}

package devfleet

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/journal"
)

// On the dev fleet (make run), a conversation's second turn is prefilled
// on the engine that holds the first turn's blocks, with the placement's
// cache evidence in the journal.
func TestDevFleetPrefillsTheSecondTurnWhereTheFirstIs(t *testing.T) {
	run := start(t)
	defer run.stop()
	system := strings.Repeat("You are the harbour master's assistant; answer in one line. ", 10)
	msgs := []map[string]string{{"role": "system", "content": system}, {"role": "user", "content": "When is high tide?"}}
	chat := func(m []map[string]string) string { id, _ := chatTurn(t, run.base, m); return id }
	first := rowOf(t, run.dir, chat(msgs))
	if first.PrefillIID == nil {
		t.Fatalf("first turn has no prefill engine: %+v", first)
	}
	turn2 := append(msgs, map[string]string{"role": "assistant", "content": "At six."},
		map[string]string{"role": "user", "content": "And low tide?"})
	// The router learns the first turn's blocks on its next residency refresh (monitor_interval_s).
	for try := 0; try < 20; try++ {
		row := rowOf(t, run.dir, chat(turn2))
		if cp := row.CachePlacement; cp != nil {
			if cp.PlacedIID != *first.PrefillIID || row.PrefillIID == nil || *row.PrefillIID != cp.PlacedIID || cp.PlacedCachedTokens < 16 {
				t.Fatalf("second turn: prefill %v, cache_placement %+v; want the first turn's engine %s", row.PrefillIID, cp, *first.PrefillIID)
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("no second turn was placed warm within 20 tries")
}

func rowOf(t *testing.T, dir, rid string) *journal.RequestRow {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		j, err := journal.ReadFile(filepath.Join(dir, "journal.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range j.Requests {
			if r.Request.RID == rid {
				return r.Request
			}
		}
	}
	t.Fatalf("no journal row for %s", rid)
	return nil
}

// issue 32's must-hold on make run's fleet: a 4-turn chat with a 1.7k-token
// system prompt prices turns 2–4 warm on the engine holding it, and the
// cached tokens the engine reports equal the ones the placement predicted
// (narwhal_cache_reported_tokens_total against
// narwhal_cache_predicted_tokens_total, as an operator compares them).
// Before, a follow-up's suffix (tens of tokens) and its prefix were
// outside the warm sweep's grid, so every follow-up was priced cold.
func TestDevFleetPricesEveryFollowUpTurnWarm(t *testing.T) {
	run := start(t)
	defer run.stop()
	system := strings.Repeat("You are the harbour master's assistant for the port of Tobermory; answer tide and berth questions in one line. ", 52)
	msgs := []map[string]string{{"role": "system", "content": system}, {"role": "user", "content": "When is high tide?"}}
	chat := func(m []map[string]string) (string, int) { return chatTurn(t, run.base, m) }
	// waitLearned waits until the router has applied iid's KV events past
	// seq (read before a turn was sent) and no more arrive for 300 ms: the
	// engine publishes a turn's evictions and stores in a few batches, and
	// the next turn must be priced from all of them, as a user's next
	// message a moment later is.
	waitLearned := func(iid string, seq int64) {
		last, still := seq, 0
		for deadline := time.Now().Add(10 * time.Second); still < 6; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s's residency did not settle past sequence %d (at %d)", iid, seq, last)
			}
			cur := residencySeq(t, run.base, iid)
			if cur == last && cur > seq {
				still++
				continue
			}
			last, still = cur, 0
		}
	}
	seqs := map[string]int64{}
	for _, e := range []string{"p0", "p1"} {
		waitLearned(e, 0) // the profile sweep's history, replayed at start
		seqs[e] = residencySeq(t, run.base, e)
	}
	rid, n := chat(msgs)
	first := rowOf(t, run.dir, rid)
	if n < 1500 || n > 2100 || first.PrefillIID == nil {
		t.Fatalf("first turn: %d prompt tokens (want about 1.7k), prefill %v", n, first.PrefillIID)
	}
	iid := *first.PrefillIID
	waitLearned(iid, seqs[iid])
	warm := 0
	for turn := 2; turn <= 4; turn++ {
		// Each turn adds more than a block (16 tokens) of new text, so the
		// engine stores new blocks and publishes them.
		msgs = append(msgs, map[string]string{"role": "assistant", "content": "High tide is at six in the morning and again at half past six in the evening."},
			map[string]string{"role": "user", "content": fmt.Sprintf("And what about day %d of the spring tides, when the berths at the north pier are busiest?", turn)})
		seq := residencySeq(t, run.base, iid)
		predicted0, reported0 := cacheTokens(t, run.base, iid)
		rid, _ = chat(msgs)
		row := rowOf(t, run.dir, rid)
		cp := row.CachePlacement
		if cp == nil {
			t.Fatalf("turn %d was priced cold although %s had learned the turn before: evidence %v, placed on %v, input %d",
				turn, iid, row.CachedTokens, row.PrefillIID, row.InputLen)
		}
		predicted, reported := cacheTokens(t, run.base, iid)
		if cp.PlacedIID != iid || predicted-predicted0 != float64(cp.PlacedCachedTokens) || reported-reported0 != predicted-predicted0 {
			t.Fatalf("turn %d: placed %s predicting %d cached tokens (metric +%v); the engine reported +%v; want %s and equal counts",
				turn, cp.PlacedIID, cp.PlacedCachedTokens, predicted-predicted0, reported-reported0, iid)
		}
		warm++
		waitLearned(iid, seq)
	}
	if warm != 3 {
		t.Fatalf("%d of 3 follow-up turns priced warm", warm)
	}
}

// residencySeq is the router's residency sequence for iid: the last KV
// event it applied.
func residencySeq(t *testing.T, base, iid string) int64 {
	t.Helper()
	resp, err := http.Get(base + "/narwhal/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Residency map[string]struct {
			Sequence int64 `json:"sequence"`
		} `json:"residency"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.Residency[iid].Sequence
}

// cacheTokens reads the router's predicted and engine-reported cached
// token counters for iid.
func cacheTokens(t *testing.T, base, iid string) (predicted, reported float64) {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		for name, dst := range map[string]*float64{"narwhal_cache_predicted_tokens_total": &predicted, "narwhal_cache_reported_tokens_total": &reported} {
			if rest, ok := strings.CutPrefix(line, name+`{iid="`+iid+`"} `); ok {
				fmt.Sscan(rest, dst)
			}
		}
	}
	return predicted, reported
}

// chatTurn sends one chat turn to the dev fleet's router and returns its
// request id and prompt tokens. A 429 is load that passes (a loaded CI
// machine's profile and loop lag can refuse a turn): the client retries
// it, as an SDK would, a bounded number of times.
func chatTurn(t *testing.T, base string, m []map[string]string) (string, int) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"model": "narwhal/sim-llama-3-8b", "max_tokens": 4, "messages": m})
	for try := 0; ; try++ {
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests && try < 20 {
			time.Sleep(250 * time.Millisecond)
			continue
		}
		if resp.StatusCode != 200 {
			t.Fatalf("HTTP %d after %d tries", resp.StatusCode, try+1)
		}
		return resp.Header.Get("X-Narwhal-Request-Id"), out.Usage.PromptTokens
	}
}

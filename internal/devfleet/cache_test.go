package devfleet

import (
	"encoding/json"
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
	// A 429 is load that passes (a loaded CI machine's profile and loop
	// lag can refuse a turn): the client retries it, as an SDK would,
	// a bounded number of times.
	chat := func(m []map[string]string) string {
		b, _ := json.Marshal(map[string]any{"model": "narwhal/sim-llama-3-8b", "max_tokens": 4, "messages": m})
		for try := 0; ; try++ {
			resp, err := http.Post(run.base+"/v1/chat/completions", "application/json", strings.NewReader(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests && try < 20 {
				time.Sleep(250 * time.Millisecond)
				continue
			}
			if resp.StatusCode != 200 {
				t.Fatalf("HTTP %d after %d tries", resp.StatusCode, try+1)
			}
			return resp.Header.Get("X-Narwhal-Request-Id")
		}
	}
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

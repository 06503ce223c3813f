package router

import (
	"os"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// A state change on a request goroutine (an ejection after a failed leg)
// only signals: it returns while the handoff file is still being written,
// and the writer catches up afterwards.
func TestStateChangedDoesNotWaitForTheHandoffFile(t *testing.T) {
	path := t.TempDir() + "/state.json"
	h := newHarness(t, []fleet.Role{fleet.Prefill, fleet.Decode}, nil, func(o *Options) { o.HA.StatePath = path })
	h.router.handoffMu.Lock() // a slow disk: a write in progress holds the file
	done := make(chan struct{})
	go func() {
		for range 100 {
			h.router.stateChanged()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		h.router.handoffMu.Unlock()
		t.Fatal("stateChanged waited for the handoff write in progress")
	}
	h.router.handoffMu.Unlock()
	eventually(t, "the writer to write the handoff", func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
}

// Package enginelimits holds what the engines report about the served
// model on their /v1/models: each one's context length (max_model_len),
// and the smallest of them, which bounds every request since either leg
// may land on any engine. The credential probe learns them (its answer is
// the same document); the request path reads only Least, one atomic load.
package enginelimits

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/narwhal-go/narwhal/internal/avail"
	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/probe"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// RefreshEvery is how often the engines are asked again when no liveness
// sweep does it (recovery.liveness_every 0): an engine restarted with
// another --max-model-len is seen within it.
const RefreshEvery = 30 * time.Second

// Limits are the engines' context lengths. The zero value is ready.
type Limits struct {
	mu    sync.Mutex     // guards byIID; taken where a probe's answer arrives, never by a request
	byIID map[string]int // iid → max_model_len it last reported
	least atomic.Int64   // the smallest positive byIID value, 0 when none; stored with byIID
}

// Least is the smallest context length any engine reported; 0 when none
// has reported one.
func (l *Limits) Least() int { return int(l.least.Load()) }

// Set records the context length iid reported (0: it did not say).
func (l *Limits) Set(iid string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byIID == nil {
		l.byIID = map[string]int{}
	}
	l.byIID[iid] = n
	least := 0
	for _, n := range l.byIID {
		if n > 0 && (least == 0 || n < least) {
			least = n
		}
	}
	l.least.Store(int64(least))
}

// Note records model's max_model_len from iid's /v1/models answer.
func (l *Limits) Note(iid, model string, cards []vllm.ModelCard) {
	for _, card := range cards {
		if card.ID == model {
			l.Set(iid, card.MaxModelLen)
		}
	}
}

// Source is where the lengths are learned: the engines, the served model,
// and the credential probe (probe.Prober.Credential) that reads /v1/models.
type Source struct {
	IIDs  []string
	Model string
	Ask   func(ctx context.Context, iid string) probe.Credential
	Log   *slog.Logger
}

// Learn asks every engine at once, each bounded by the probe. An engine
// that does not answer keeps what it reported before.
func (l *Limits) Learn(ctx context.Context, src Source) {
	avail.ForEach(ctx, src.IIDs, func(ctx context.Context, iid string) {
		c := src.Ask(ctx, iid)
		if c.Err != nil {
			src.Log.Debug("engine /v1/models unavailable; its context length stays as last seen", "iid", iid, "err", fault.Detail(c.Err))
			return
		}
		l.Note(iid, src.Model, c.Cards)
	})
}

// Watch learns the lengths again RefreshEvery after each refresh until
// ctx ends. Only needed while liveness sweeps are off: otherwise every
// sweep's credential probe reads the same document.
func (l *Limits) Watch(ctx context.Context, clock ports.Clock, src Source) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-clock.After(RefreshEvery):
		}
		l.Learn(ctx, src)
	}
}

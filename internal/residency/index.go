package residency

import (
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/narwhal-go/narwhal/internal/kvevents"
)

// Index is the sidecar's residency: every block the engine's events say
// is resident, and the recent changes. It implements kvevents.Handler.
type Index struct {
	epoch  string
	start  float64
	hasher *kvevents.Hasher // verifies first blocks against the configured seed; nil skips
	limit  int

	mu        sync.Mutex // guards every field below
	known     bool
	reason    string
	seq       int64
	blockSize int
	groups    map[string]map[uint64]struct{}
	changes   []Change // oldest first, at most MaxChanges
}

// NewIndex starts an unknown index for one engine process. epoch is the
// sidecar's random per-process id; start the engine's process start time.
func NewIndex(epoch string, start float64, h *kvevents.Hasher) *Index {
	return &Index{epoch: epoch, start: start, hasher: h, limit: MaxIndex, seq: -1,
		reason: "subscribing to the engine's cache events", groups: map[string]map[uint64]struct{}{}}
}

// Begin implements kvevents.Handler.
func (x *Index) Begin(complete bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.resetLocked()
	if complete {
		x.known, x.reason = true, "complete event history"
		return
	}
	x.loseLocked("the engine published batches this sidecar can no longer replay; restart the engine or POST /reset_prefix_cache")
}

// Gap implements kvevents.Handler.
func (x *Index) Gap(from, to int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.loseLocked(fmt.Sprintf("sequence gap: batches %d to %d are lost", from, to-1))
}

// Lose marks residency unknown (the subscription failed).
func (x *Index) Lose(reason string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.loseLocked(reason)
}

func (x *Index) loseLocked(reason string) {
	x.known, x.reason = false, reason
	x.resetLocked()
}

func (x *Index) resetLocked() {
	x.groups = map[string]map[uint64]struct{}{}
	x.changes = nil
}

// Apply implements kvevents.Handler: one batch, in order.
func (x *Index) Apply(seq int64, b kvevents.Batch) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.seq = seq
	ch := Change{Sequence: seq, Groups: map[string]GroupChange{}}
	for _, e := range b.Events {
		if reason := x.applyLocked(e, &ch); reason != "" {
			x.loseLocked(reason)
		}
	}
	if !x.known {
		return
	}
	if len(x.changes) >= MaxChanges {
		x.changes = slices.Delete(x.changes, 0, 1)
	}
	x.changes = append(x.changes, ch)
}

// applyLocked applies one event and returns why residency became unknown
// ("" when it did not).
func (x *Index) applyLocked(e kvevents.Event, ch *Change) string {
	g := strconv.Itoa(e.GroupIdx)
	switch e.Kind {
	case kvevents.KindCleared:
		x.resetLocked()
		ch.Cleared, ch.Groups = true, map[string]GroupChange{}
		x.known, x.reason = true, "complete event history since the cache reset"
		return ""
	case kvevents.KindStored:
		if x.blockSize != 0 && e.BlockSize != x.blockSize {
			return fmt.Sprintf("groups with different block sizes (%d and %d)", x.blockSize, e.BlockSize)
		}
		x.blockSize = e.BlockSize
		if reason := x.verify(e); reason != "" {
			return reason
		}
	}
	if !x.known {
		return ""
	}
	set := x.groups[g]
	if set == nil {
		set = map[uint64]struct{}{}
		x.groups[g] = set
	}
	gc := ch.Groups[g]
	gc.Kind = KindFull
	if e.Kind == kvevents.KindStored {
		for _, h := range e.Hashes {
			set[h] = struct{}{}
		}
		gc.Stored = append(gc.Stored, e.Hashes...)
	} else {
		for _, h := range e.Hashes {
			delete(set, h)
		}
		gc.Removed = append(gc.Removed, e.Hashes...)
	}
	ch.Groups[g] = gc
	if x.sizeLocked() > x.limit {
		return fmt.Sprintf("index larger than %d blocks", x.limit)
	}
	return ""
}

// verify checks a chain's first block against the configured seed: a
// router hashing prompts with another seed would find nothing resident.
func (x *Index) verify(e kvevents.Event) string {
	if x.hasher == nil || e.Parent != nil || len(e.Hashes) == 0 || len(e.TokenIDs) < x.hasher.BlockSize() {
		return ""
	}
	want := x.hasher.Block(x.hasher.NoneHash(), e.TokenIDs[:x.hasher.BlockSize()]).External()
	if want != e.Hashes[0] {
		return "the engine's block hashes do not match the configured hash algorithm and PYTHONHASHSEED (check --hash-seed)"
	}
	return ""
}

func (x *Index) sizeLocked() int {
	n := 0
	for _, s := range x.groups {
		n += len(s)
	}
	return n
}

// Snapshot is the current residency.
func (x *Index) Snapshot() Snapshot {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := Snapshot{Known: x.known, Reason: x.reason, Sequence: x.seq, BlockSize: x.blockSize, Epoch: x.epoch,
		ProcessStartTimeSecond: x.start, Groups: []GroupSnap{}}
	if x.hasher != nil {
		none := x.hasher.NoneHash()
		s.Hashing = &Hashing{Algo: string(x.hasher.Algo()), NoneHash: hex.EncodeToString(none[:])}
	}
	if !x.known {
		return s
	}
	for _, g := range slices.Sorted(maps.Keys(x.groups)) {
		ids := slices.Sorted(maps.Keys(x.groups[g]))
		s.Groups = append(s.Groups, GroupSnap{Group: g, Kind: KindFull, Identities: ids})
	}
	return s
}

// Since is the changes after sequence after; ok is false when the caller
// must resynchronise from the snapshot (residency unknown, after ahead of
// the index, or changes after it no longer kept).
func (x *Index) Since(after int64) (Events, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ev := Events{Epoch: x.epoch, Sequence: x.seq, BlockSize: x.blockSize, Reason: x.reason, Changes: []Change{}}
	if !x.known || after > x.seq {
		return ev, false
	}
	if after < x.seq && (len(x.changes) == 0 || x.changes[0].Sequence > after+1) {
		return ev, false
	}
	for _, c := range x.changes {
		if c.Sequence > after {
			ev.Changes = append(ev.Changes, c)
		}
	}
	return ev, true
}

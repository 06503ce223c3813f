package residency

import (
	"encoding/hex"
	"fmt"

	"github.com/narwhal-go/narwhal/internal/kvevents"
)

// DefaultViewLimit is how many blocks a router keeps per engine before it
// gives up on that engine's residency (priced cold until resynchronised).
const DefaultViewLimit = 100_000

// View is the router's copy of one engine's residency. It is not safe for
// concurrent use (the Tracker serialises it).
type View struct {
	Known     bool
	Reason    string
	Epoch     string
	Sequence  int64
	BlockSize int
	Resyncs   int
	hasher    *kvevents.Hasher
	limit     int
	set       map[uint64]struct{}
}

// NewView is an unknown view holding at most limit blocks (≤ 0: the
// default).
func NewView(limit int) *View {
	if limit <= 0 {
		limit = DefaultViewLimit
	}
	return &View{limit: limit, Reason: "no residency read yet", Sequence: -1}
}

// Lose forgets everything: residency is unknown until the next snapshot.
func (v *View) Lose(reason string) {
	v.Known, v.Reason, v.set = false, reason, nil
}

// Reset replaces the view with a snapshot.
func (v *View) Reset(s Snapshot) {
	v.Resyncs++
	v.Epoch, v.Sequence, v.BlockSize = s.Epoch, s.Sequence, s.BlockSize
	if !s.Known {
		v.Lose(s.Reason)
		return
	}
	if err := v.setHasher(s); err != nil {
		v.Lose(err.Error())
		return
	}
	v.set = map[uint64]struct{}{}
	for _, g := range s.Groups {
		if g.Group != Group {
			continue
		}
		if len(g.Identities) > v.limit {
			v.Lose(fmt.Sprintf("the engine holds %d blocks, over the router's limit of %d", len(g.Identities), v.limit))
			return
		}
		for _, h := range g.Identities {
			v.set[h] = struct{}{}
		}
	}
	v.Known, v.Reason = true, s.Reason
}

func (v *View) setHasher(s Snapshot) error {
	if s.Hashing == nil {
		return fmt.Errorf("the sidecar does not say how the engine hashes blocks (start narwhal-attest with --hash-seed)")
	}
	raw, err := hex.DecodeString(s.Hashing.NoneHash)
	if err != nil || len(raw) != 32 {
		return fmt.Errorf("the sidecar's none_hash %q is not 32 bytes of hex", s.Hashing.NoneHash)
	}
	bs := s.BlockSize
	if bs <= 0 {
		bs = 16 // nothing stored yet: vLLM's default, replaced by the first event's size
	}
	v.hasher, err = kvevents.NewHasherWithNone(kvevents.Algo(s.Hashing.Algo), bs, kvevents.Hash(raw))
	return err
}

// Apply applies the changes of one events read, in order. It reports
// false when the view must resynchronise (an epoch or sequence it cannot
// follow, or the limit crossed); the view is then unknown.
func (v *View) Apply(ev Events) bool {
	if !v.Known || ev.Epoch != v.Epoch {
		v.Lose("the sidecar restarted")
		return false
	}
	for _, c := range ev.Changes {
		if c.Sequence <= v.Sequence {
			continue
		}
		if !v.ApplyChange(c) {
			return false
		}
	}
	v.Sequence = max(v.Sequence, ev.Sequence)
	if ev.BlockSize > 0 {
		v.BlockSize = ev.BlockSize
	}
	return true
}

// ApplyChange applies one change: the router's per-event upkeep.
func (v *View) ApplyChange(c Change) bool {
	if c.Cleared {
		clear(v.set)
	}
	g, ok := c.Groups[Group]
	if ok {
		for _, h := range g.Stored {
			v.set[h] = struct{}{}
		}
		for _, h := range g.Removed {
			delete(v.set, h)
		}
	}
	v.Sequence = c.Sequence
	if len(v.set) > v.limit {
		v.Lose(fmt.Sprintf("the engine holds more than the router's limit of %d blocks", v.limit))
		return false
	}
	return true
}

// Blocks is how many blocks the view holds.
func (v *View) Blocks() int { return len(v.set) }

// hashKey names the hashing a view needs, so one prompt is hashed once
// per distinct engine configuration.
type hashKey struct {
	algo string
	none [32]byte
	bs   int
}

func (v *View) key() (hashKey, bool) {
	if !v.Known || v.hasher == nil {
		return hashKey{}, false
	}
	bs := v.hasher.BlockSize()
	if v.BlockSize > 0 {
		bs = v.BlockSize
	}
	return hashKey{string(v.hasher.Algo()), v.hasher.NoneHash(), bs}, true
}

// blockHashes hashes the blocks of a prompt vLLM could hit: whole blocks
// short of the last prompt token, which is always computed.
func blockHashes(k hashKey, tokens []int) []uint64 {
	h, err := kvevents.NewHasherWithNone(kvevents.Algo(k.algo), k.bs, k.none)
	if err != nil {
		return nil
	}
	usable := max(len(tokens)-1, 0) / k.bs
	return h.Externals(tokens[:usable*k.bs])
}

// prefix counts the leading hashes the view holds.
func (v *View) prefix(hs []uint64) int {
	n := 0
	for _, h := range hs {
		if _, ok := v.set[h]; !ok {
			break
		}
		n++
	}
	return n
}

// CachedTokens is how many leading tokens of a prompt the engine holds in
// whole blocks, capped as vLLM caps a hit. ok is false when residency is
// unknown.
func (v *View) CachedTokens(tokens []int) (int, bool) {
	k, ok := v.key()
	if !ok {
		return 0, false
	}
	return v.prefix(blockHashes(k, tokens)) * k.bs, true
}

// Package residency is which prefix-cache blocks each engine holds: the
// sidecar's index built from the engine's KV cache events (Index), the
// documents its residency routes serve (Snapshot, Events), and the
// router's bounded per-engine views kept from those routes (View,
// Tracker). Residency that is not known is never guessed: an unknown
// engine is priced cold.
package residency

// Group names the one KV cache group narwhal tracks: vLLM's group 0, full
// attention. Events of other groups (hybrid models) are kept apart and
// never used for pricing.
const (
	Group         = "0"
	KindFull      = "full_attention"
	MaxIndex      = 1_000_000 // blocks the sidecar indexes before giving up
	MaxChanges    = 4096      // changes the sidecar keeps for /v1/residency/events
	NoEventsError = "engine publishes no cache events"
	ResyncError   = "resynchronise from the residency snapshot"
)

// Snapshot is GET /v1/residency.
type Snapshot struct {
	Known                  bool        `json:"known"`
	Reason                 string      `json:"reason"`
	Sequence               int64       `json:"sequence"` // last batch applied; -1 before the first
	BlockSize              int         `json:"block_size"`
	Groups                 []GroupSnap `json:"groups"`
	Epoch                  string      `json:"epoch"`
	ProcessStartTimeSecond float64     `json:"process_start_time_seconds"`
	// Hashing is narwhal's extension: how the engine hashes blocks, so a
	// router can name the blocks of a prompt it tokenized.
	Hashing *Hashing `json:"hashing,omitempty"`
}

// Hashing is the engine's --prefix-caching-hash-algo and the chain seed
// its PYTHONHASHSEED gives (NONE_HASH, hex).
type Hashing struct {
	Algo     string `json:"algo"`
	NoneHash string `json:"none_hash"`
}

// GroupSnap is one KV cache group's resident blocks.
type GroupSnap struct {
	Group         string   `json:"group"`
	Kind          string   `json:"kind"`
	SlidingWindow *int     `json:"sliding_window"`
	Identities    []uint64 `json:"identities"` // block hashes as KV events carry them
	Unnamed       int      `json:"unnamed"`    // resident blocks without a hash (none in v1)
}

// Events is GET /v1/residency/events?after=N.
type Events struct {
	Epoch     string   `json:"epoch"`
	Sequence  int64    `json:"sequence"`
	BlockSize int      `json:"block_size"`
	Reason    string   `json:"reason"`
	Changes   []Change `json:"changes"`
}

// Change is one applied event batch.
type Change struct {
	Sequence int64                  `json:"sequence"`
	Cleared  bool                   `json:"cleared"` // the cache was reset before Groups applied
	Groups   map[string]GroupChange `json:"groups"`
}

// GroupChange is what one batch stored and removed in one group.
type GroupChange struct {
	Kind          string   `json:"kind"`
	SlidingWindow *int     `json:"sliding_window"`
	Stored        []uint64 `json:"stored"`
	Removed       []uint64 `json:"removed"`
}

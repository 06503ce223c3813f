package httpguard

import (
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
)

// Slots count what clients hold at once, per remote IP address and in
// all: the slow request bodies being read (the router's slow-body guard)
// and the open dashboard feeds. The zero value is ready to use. It takes
// no lock: each address has an atomic counter in a sync.Map, retired (-1)
// and removed when it drops to zero, so the map holds only addresses
// holding a slot.
type Slots struct {
	byIP  sync.Map     // remote IP → *atomic.Int64: slots held now, -1 once retired
	total atomic.Int64 // slots held now, by every client
}

// BodyReads are the slow request bodies being read (kept as a name for
// the router's field and state document).
type BodyReads = Slots

// Refusal says which bound a Claim met.
type Refusal int

const (
	// Granted: the slot is held until Done.
	Granted Refusal = iota
	// ClientFull: this address already holds its share.
	ClientFull
	// AllFull: every client together holds the total.
	AllFull
)

// Take claims one of ip's limit slots, with no bound on the total; false
// when all of ip's are in use.
func (b *Slots) Take(ip string, limit int) bool { return b.Claim(ip, limit, 0) == Granted }

// Claim takes one slot for ip if ip holds fewer than perClient and every
// client together fewer than total (0: no total bound). The total is
// claimed first and given back when the address is full, so neither
// bound is passed even for an instant.
func (b *Slots) Claim(ip string, perClient, total int) Refusal {
	for total > 0 {
		k := b.total.Load()
		if k >= int64(total) {
			return AllFull
		}
		if b.total.CompareAndSwap(k, k+1) {
			break
		}
	}
	if total <= 0 {
		b.total.Add(1)
	}
	if !b.takeIP(ip, perClient) {
		b.total.Add(-1)
		return ClientFull
	}
	return Granted
}

func (b *Slots) takeIP(ip string, limit int) bool {
	for {
		v, ok := b.byIP.Load(ip)
		if !ok {
			v, _ = b.byIP.LoadOrStore(ip, new(atomic.Int64))
		}
		n := v.(*atomic.Int64)
		k := n.Load()
		switch {
		case k < 0: // retired by the last Done: remove it and start a fresh counter
			b.byIP.CompareAndDelete(ip, n)
		case k >= int64(limit):
			return false
		case n.CompareAndSwap(k, k+1):
			return true
		}
	}
}

// Done gives ip's slot back.
func (b *Slots) Done(ip string) {
	v, ok := b.byIP.Load(ip)
	if !ok {
		return // no Take to match
	}
	n := v.(*atomic.Int64)
	b.total.Add(-1)
	if n.Add(-1) == 0 && n.CompareAndSwap(0, -1) {
		b.byIP.CompareAndDelete(ip, n) // a Take that raced in first keeps it alive
	}
}

// Total is the number of slots held now, by every client.
func (b *Slots) Total() int { return int(b.total.Load()) }

// addresses is how many addresses the map holds.
func (b *Slots) addresses() int {
	n := 0
	b.byIP.Range(func(any, any) bool { n++; return true })
	return n
}

// ClientIP is the remote address without its port.
func ClientIP(req *http.Request) string {
	if host, _, err := net.SplitHostPort(req.RemoteAddr); err == nil {
		return host
	}
	return req.RemoteAddr
}

// IsTimeout reports whether a read failed on its deadline.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

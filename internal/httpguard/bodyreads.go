package httpguard

import (
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
)

// BodyReads counts the completion bodies being read, per remote IP
// address, so one client cannot hold an unbounded number of connections
// mid-body. The zero value is ready to use. It takes no lock: each
// address has an atomic counter in a sync.Map, retired (-1) and removed
// when it drops to zero, so the map holds only addresses mid-body.
type BodyReads struct {
	byIP  sync.Map     // remote IP → *atomic.Int64: bodies being read now, -1 once retired
	total atomic.Int64 // bodies being read now, from every client
}

// Take claims one of ip's limit slots; false when all are in use.
func (b *BodyReads) Take(ip string, limit int) bool {
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
			b.total.Add(1)
			return true
		}
	}
}

// Done gives ip's slot back.
func (b *BodyReads) Done(ip string) {
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

// Total is the number of bodies being read now, from every client.
func (b *BodyReads) Total() int { return int(b.total.Load()) }

// addresses is how many addresses the map holds.
func (b *BodyReads) addresses() int {
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

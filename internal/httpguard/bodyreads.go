package httpguard

import (
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
)

// BodyReads counts the completion bodies being read, per remote IP
// address, so one client cannot hold an unbounded number of connections
// mid-body. The zero value is ready to use.
type BodyReads struct {
	mu   sync.Mutex     // guards byIP
	byIP map[string]int // remote IP → bodies being read now
}

// Take claims one of ip's limit slots; false when all are in use.
func (b *BodyReads) Take(ip string, limit int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byIP[ip] >= limit {
		return false
	}
	if b.byIP == nil {
		b.byIP = map[string]int{}
	}
	b.byIP[ip]++
	return true
}

// Done gives ip's slot back.
func (b *BodyReads) Done(ip string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byIP[ip]--; b.byIP[ip] <= 0 {
		delete(b.byIP, ip)
	}
}

// Total is the number of bodies being read now, from every client.
func (b *BodyReads) Total() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, k := range b.byIP {
		n += k
	}
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

// Package takeover is the router's high-availability side: the fenced
// lease it claims, renews and reclaims; the warm standby that follows a
// primary and takes over when the primary's lease expires; the handoff
// document (narwhal.handoff v1) built from the router's state, applied on
// resume or takeover, and written by a coalescing writer off the request
// path; and the crash accounting that closes the requests a previous
// router lost (admission records, router_lost rows, counters made whole).
//
// The documents, the lease (over any state.LeaseStore: file, etcd or
// Kubernetes) and the follower loop are internal/state's; this package
// decides when they are used. It sees the router only through
// the Router interface (a snapshot to read, restored state to apply, a few
// runtime hooks) and the engines' lifecycle through Lifecycle, so the
// router keeps the HTTP and its lock, and this package keeps the rules.
package takeover

// Package etcdlease keeps the router lease in etcd: a state.LeaseStore
// whose every write is a transaction that compares the record's
// mod_revision with the one it read, so two routers never both take an
// expired lease.
//
// Two keys hold the lease. <key>/term is the durable record (the same
// narwhal.router-lease document as the file backend, epoch included, so
// epochs keep counting across terms). <key> is its copy attached to an
// etcd lease of ttl seconds that the holder refreshes on every renewal:
// etcd deletes it once the holder stops renewing, by etcd's own clock.
// A record whose <key> is gone reads as expired, so a standby never waits
// on a dead primary's wall-clock expiry longer than the etcd lease.
package etcdlease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/narwhal-go/narwhal/internal/state"
)

// DefaultKey is the lease key when the fleet names none.
const DefaultKey = "/narwhal/router-lease"

// Store is one router's client on the lease keys.
type Store struct {
	cli       *clientv3.Client
	key, term string

	// mu guards lease: the etcd lease <key> is attached to, 0 before the
	// first write; renewals refresh it rather than grant a new one.
	mu    sync.Mutex
	lease clientv3.LeaseID
}

// reconnect paces the client's redials while etcd is unreachable. gRPC's
// default backoff grows to 120 s, so after an outage of half a minute the
// next redial could come many lease periods after etcd is back, and every
// fenced router would wait for it; redialling at least every second keeps
// a claim within two lease periods of etcd's return.
var reconnect = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: time.Second,
}

// Open connects to the etcd cluster at endpoints (http://host:port). It
// does not wait for the cluster: the first claim does.
func Open(endpoints []string, key string) (*Store, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("etcd lease: no endpoints; set recovery.lease.etcd_endpoints")
	}
	if key == "" {
		key = DefaultKey
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second,
		Logger: zap.NewNop(), DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: time.Second,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(reconnect)}})
	if err != nil {
		return nil, fmt.Errorf("etcd lease %s: connect to %v: %w; check recovery.lease.etcd_endpoints", key, endpoints, err)
	}
	return &Store{cli: cli, key: key, term: key + "/term"}, nil
}

// Where names the record: "etcd:<key>".
func (s *Store) Where() string { return "etcd:" + s.key }

// Close revokes nothing (a held lease expires by itself) and closes the
// client.
func (s *Store) Close() error { return s.cli.Close() }

// snapshot is the record as read, with the revision a write compares on.
type snapshot struct {
	doc state.Doc
	ok  bool
	rev int64 // mod_revision of <key>/term; 0 when absent
}

// Read returns the record.
func (s *Store) Read(ctx context.Context) (state.Doc, bool, error) {
	sn, err := s.read(ctx)
	return sn.doc, sn.ok, err
}

func (s *Store) read(ctx context.Context) (snapshot, error) {
	resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(s.term), clientv3.OpGet(s.key)).Commit()
	if err != nil {
		return snapshot{}, s.fail("read", err)
	}
	terms, live := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	if len(terms) == 0 {
		return snapshot{}, nil
	}
	var d state.Doc
	if err := json.Unmarshal(terms[0].Value, &d); err != nil || d.Epoch < 1 || d.Holder == "" {
		return snapshot{}, fmt.Errorf("etcd lease %s: the record is not a router lease (%v); stop every router sharing it, then delete the key", s.term, err)
	}
	if len(live) == 0 {
		d.ExpiresAt = math.Min(d.ExpiresAt, d.UpdatedAt) // etcd expired the holder's lease
	}
	return snapshot{doc: d, ok: true, rev: terms[0].ModRevision}, nil
}

// Update reads, decides and writes in a transaction on the revision read.
func (s *Store) Update(ctx context.Context, fn func(state.Doc, bool) (*state.Doc, error)) error {
	return state.RetryConflicts(ctx, s.Where(), func() error {
		sn, err := s.read(ctx)
		if err != nil {
			return err
		}
		next, err := fn(sn.doc, sn.ok)
		if err != nil || next == nil {
			return err
		}
		return s.write(ctx, sn.rev, *next)
	})
}

// write puts next if <key>/term is still at rev. A live record's <key>
// rides the holder's etcd lease; a released one drops it and the lease.
func (s *Store) write(ctx context.Context, rev int64, next state.Doc) error {
	next.Schema, next.SchemaVersion = state.LeaseSchema, state.LeaseSchemaVersion
	b, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("etcd lease %s: %w", s.key, err)
	}
	released := next.ExpiresAt <= next.UpdatedAt
	live := clientv3.OpDelete(s.key)
	if !released {
		id, err := s.leaseFor(ctx, next.ExpiresAt-next.UpdatedAt)
		if err != nil {
			return err
		}
		live = clientv3.OpPut(s.key, string(b), clientv3.WithLease(id))
	}
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(s.term), "=", rev)).
		Then(clientv3.OpPut(s.term, string(b)), live).Commit()
	switch {
	case err != nil:
		return s.fail("write", err)
	case !resp.Succeeded:
		return state.ErrLeaseConflict
	case released:
		s.revoke(ctx)
	}
	return nil
}

// leaseFor refreshes this router's etcd lease, or grants one of ttl
// seconds rounded up when there is none or it has already expired.
func (s *Store) leaseFor(ctx context.Context, ttlS float64) (clientv3.LeaseID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease != 0 {
		if _, err := s.cli.KeepAliveOnce(ctx, s.lease); err == nil {
			return s.lease, nil
		}
	}
	g, err := s.cli.Grant(ctx, int64(math.Ceil(ttlS)))
	if err != nil {
		return 0, s.fail("grant an etcd lease", err)
	}
	s.lease = g.ID
	return g.ID, nil
}

// revoke ends this router's etcd lease after a release; failing is
// harmless, it expires by itself.
func (s *Store) revoke(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease != 0 {
		_, _ = s.cli.Revoke(ctx, s.lease)
		s.lease = 0
	}
}

func (s *Store) fail(op string, err error) error {
	return fmt.Errorf("etcd lease %s: %s: %w; is etcd reachable at %v?", s.key, op, err, s.cli.Endpoints())
}

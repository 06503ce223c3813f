package main

import (
	"os"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/etcdlease"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/kubelease"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/state"
)

// openLease builds the router lease recovery.lease selects, or nil when
// there is none: the file backend is on only with --lease-path, etcd and
// kubernetes always are.
func openLease(f flags, l fleet.Lease) (*state.Lease, error) {
	if l.Backend != fleet.LeaseFile && f.leasePath != "" {
		return nil, cli.Usage("--lease-path names a lease file, but recovery.lease.backend is %q; drop the flag or the backend", l.Backend)
	}
	id := f.routerID
	if id == "" {
		id, _ = os.Hostname()
	}
	var store state.LeaseStore
	switch l.Backend {
	case fleet.LeaseFile:
		if f.leasePath == "" {
			return nil, nil
		}
		store = state.FileStore(f.leasePath)
	case fleet.LeaseEtcd:
		s, err := etcdlease.Open(l.Endpoints(), l.EtcdKey)
		if err != nil {
			return nil, cli.Failed(err)
		}
		store = s
	case fleet.LeaseKubernetes:
		s, err := kubelease.InCluster(l.KubernetesNamespace, l.KubernetesName)
		if err != nil {
			return nil, cli.Failed(err)
		}
		store = s
	}
	lease, err := state.NewLeaseOn(store, id, f.leaseTTL, f.leaseRenew, f.leaseMargin, ports.SystemClock(), ports.RandomIDs())
	if err != nil {
		_ = store.Close()
		return nil, cli.Usage("%v", err)
	}
	return lease, nil
}

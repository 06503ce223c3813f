package kubelease

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/typed/coordination/v1/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/state"
	"github.com/narwhal-go/narwhal/internal/state/leasetest"
)

var leasesGVR = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

// fakeAPI is client-go's fake coordination client over an object
// tracker, with the API server's optimistic concurrency: an update whose
// resourceVersion is not the stored one is a 409 Conflict, and every
// accepted update moves the version on. The tracker alone would accept
// any update.
func fakeAPI(t *testing.T) *fake.FakeCoordinationV1 {
	scheme := runtime.NewScheme()
	if err := coordv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	tracker := k8stesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())
	f := &k8stesting.Fake{}
	var mu sync.Mutex // makes each update's version check and write one step, as in the API server
	f.AddReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		obj := a.(k8stesting.UpdateAction).GetObject()
		m, _ := meta.Accessor(obj)
		stored, err := tracker.Get(leasesGVR, a.GetNamespace(), m.GetName())
		if err != nil {
			return true, nil, err
		}
		sm, _ := meta.Accessor(stored)
		if sm.GetResourceVersion() != m.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(leasesGVR.GroupResource(), m.GetName(), errors.New("the object has been modified"))
		}
		// The tracker versions objects internally but never writes
		// metadata.resourceVersion, so without this every update would
		// carry "" and pass the check above.
		n, _ := strconv.Atoi(sm.GetResourceVersion())
		m.SetResourceVersion(strconv.Itoa(n + 1))
		if err := tracker.Update(leasesGVR, obj, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
	f.AddReactor("*", "*", k8stesting.ObjectReaction(tracker))
	return &fake.FakeCoordinationV1{Fake: f}
}

func TestKubernetesStoreConformance(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) func() state.LeaseStore {
		api := fakeAPI(t)
		return func() state.LeaseStore { return New(api.Leases("narwhal"), "narwhal", "router") }
	})
}

// A conflict on the write re-reads and decides again: one injected 409
// costs a retry; a 409 on every attempt fails the renewal, which fences.
func TestKubernetesConflictInjection(t *testing.T) {
	api := fakeAPI(t)
	var inject atomic.Int32
	var conflicts atomic.Int32
	api.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if inject.Load() == 0 {
			return false, nil, nil
		}
		inject.Add(-1)
		conflicts.Add(1)
		return true, nil, apierrors.NewConflict(leasesGVR.GroupResource(), "router", errors.New("injected"))
	})
	clk := ports.NewFake(leasetest.T0)
	a := leasetest.NewLease(t, New(api.Leases("narwhal"), "narwhal", "router"), "a", clk, 1)
	if _, err := a.Claim(); err != nil {
		t.Fatal(err)
	}
	inject.Store(1)
	clk.Advance(leasetest.Renew)
	if err := a.Renew(); err != nil || conflicts.Load() != 1 {
		t.Fatalf("renew through one conflict: %v (conflicts %d), want it retried and renewed", err, conflicts.Load())
	}
	inject.Store(100)
	clk.Advance(leasetest.Renew)
	err := a.Renew()
	if !errors.Is(err, state.ErrLeaseConflict) || !strings.Contains(err.Error(), "kubernetes:narwhal/router") || a.Valid() {
		t.Fatalf("renew under conflicts = %v (valid %v), want a conflict error naming the Lease and fenced", err, a.Valid())
	}
	if got := 100 - inject.Load(); got != state.ConflictRetries {
		t.Errorf("%d attempts under persistent conflict, want %d", got, state.ConflictRetries)
	}
}

// The Lease object carries the narwhal lease in its own fields, as
// kubectl and other tools read it.
func TestKubernetesLeaseSpec(t *testing.T) {
	api := fakeAPI(t)
	clk := ports.NewFake(leasetest.T0)
	a, err := state.NewLeaseOn(New(api.Leases("narwhal"), "narwhal", "router"), "a", 2500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond, clk, ports.SeededIDs(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Claim(); err != nil {
		t.Fatal(err)
	}
	l, err := api.Leases("narwhal").Get(context.Background(), "router", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sp := l.Spec
	if *sp.HolderIdentity != a.Holder() || *sp.LeaseTransitions != 1 || *sp.LeaseDurationSeconds != 3 ||
		!sp.RenewTime.Time.Equal(leasetest.T0) || !sp.AcquireTime.Time.Equal(leasetest.T0) {
		t.Fatalf("spec %+v; want holder %s, transitions 1, duration 3 s (2.5 s rounded up), renew and acquire at T0", sp, a.Holder())
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	l, _ = api.Leases("narwhal").Get(context.Background(), "router", metav1.GetOptions{})
	if *l.Spec.HolderIdentity != "" || *l.Spec.LeaseTransitions != 1 {
		t.Fatalf("released spec %+v; want no holder and the epoch kept", l.Spec)
	}
}

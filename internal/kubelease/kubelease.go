// Package kubelease keeps the router lease in a Kubernetes
// coordination.k8s.io/v1 Lease, with optimistic concurrency on its
// resourceVersion: a write carries the version it read, and the API
// server refuses it (409 Conflict) when another router wrote in between.
//
// The narwhal lease maps onto the Lease spec: holderIdentity is the
// holder token, leaseTransitions the epoch, renewTime the last claim or
// renewal, renewTime + leaseDurationSeconds the expiry (the ttl rounded
// up to whole seconds, so the shared expiry never comes early), and
// acquireTime the start of the current epoch. A released lease has an
// empty holderIdentity and keeps its epoch.
//
// It is its own package because client-go is large: only this package,
// its test and narwhal-serve compile it. It talks to the API server through
// client-go's REST client with a scheme of its own that knows only Lease
// (and the API's Status errors), not through the typed clientset: that
// one's scheme registers every built-in API group at start, which cost
// narwhal-serve 56 API packages, a third of its binary and ~20 MB of
// resident memory for one resource.
package kubelease

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	"github.com/narwhal-go/narwhal/internal/state"
)

// namespaceFile is where a pod's service account names its namespace.
const namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Leases is the part of a namespace's Lease API the store uses; client-go's
// typed LeaseInterface (and its fake) has it too.
type Leases interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordv1.Lease, error)
	Create(ctx context.Context, l *coordv1.Lease, opts metav1.CreateOptions) (*coordv1.Lease, error)
	Update(ctx context.Context, l *coordv1.Lease, opts metav1.UpdateOptions) (*coordv1.Lease, error)
}

// Store is one router's client on one Lease object.
type Store struct {
	leases    Leases
	namespace string
	name      string
}

// New is a store on the Lease namespace/name through leases, which must
// be that namespace's.
func New(leases Leases, namespace, name string) *Store {
	return &Store{leases: leases, namespace: namespace, name: name}
}

// restLeases is Leases over client-go's REST client.
type restLeases struct {
	c  rest.Interface
	ns string
}

// ForConfig is the Lease API of namespace on the API server cfg names.
func ForConfig(cfg *rest.Config, namespace string) (Leases, error) {
	scheme := runtime.NewScheme()
	if err := coordv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"}) // Status, for errors
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &coordv1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return restLeases{c: rc, ns: namespace}, nil
}

func (r restLeases) Get(ctx context.Context, name string, _ metav1.GetOptions) (*coordv1.Lease, error) {
	out := &coordv1.Lease{}
	err := r.c.Get().Namespace(r.ns).Resource("leases").Name(name).Do(ctx).Into(out)
	return out, err
}

func (r restLeases) Create(ctx context.Context, l *coordv1.Lease, _ metav1.CreateOptions) (*coordv1.Lease, error) {
	out := &coordv1.Lease{}
	err := r.c.Post().Namespace(r.ns).Resource("leases").Body(l).Do(ctx).Into(out)
	return out, err
}

func (r restLeases) Update(ctx context.Context, l *coordv1.Lease, _ metav1.UpdateOptions) (*coordv1.Lease, error) {
	out := &coordv1.Lease{}
	err := r.c.Put().Namespace(r.ns).Resource("leases").Name(l.Name).Body(l).Do(ctx).Into(out)
	return out, err
}

// InCluster connects with the pod's service account; namespace "" is the
// pod's own namespace.
func InCluster(namespace, name string) (*Store, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes lease %s: %w; the kubernetes backend runs inside a pod with a service account", name, err)
	}
	if namespace == "" {
		b, err := os.ReadFile(namespaceFile)
		if err != nil {
			return nil, fmt.Errorf("kubernetes lease %s: %w; set recovery.lease.kubernetes_namespace", name, err)
		}
		namespace = strings.TrimSpace(string(b))
	}
	leases, err := ForConfig(cfg, namespace)
	if err != nil {
		return nil, fmt.Errorf("kubernetes lease %s/%s: %w", namespace, name, err)
	}
	return New(leases, namespace, name), nil
}

// Where names the Lease: "kubernetes:<namespace>/<name>".
func (s *Store) Where() string { return "kubernetes:" + s.namespace + "/" + s.name }

// Close has nothing to release: the client's connections are pooled.
func (s *Store) Close() error { return nil }

// Read returns the record; no Lease object is no record.
func (s *Store) Read(ctx context.Context) (state.Doc, bool, error) {
	l, err := s.get(ctx)
	if err != nil || l == nil {
		return state.Doc{}, false, err
	}
	return toDoc(l), true, nil
}

func (s *Store) get(ctx context.Context) (*coordv1.Lease, error) {
	l, err := s.leases.Get(ctx, s.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, s.fail("get", err)
	}
	return l, nil
}

// Update reads the Lease, decides, and writes with the resourceVersion
// read (create when there is none); a 409 is a conflict to retry.
func (s *Store) Update(ctx context.Context, fn func(state.Doc, bool) (*state.Doc, error)) error {
	return state.RetryConflicts(ctx, s.Where(), func() error {
		l, err := s.get(ctx)
		if err != nil {
			return err
		}
		var cur state.Doc
		if l != nil {
			cur = toDoc(l)
		}
		next, err := fn(cur, l != nil)
		if err != nil || next == nil {
			return err
		}
		return s.write(ctx, l, *next)
	})
}

func (s *Store) write(ctx context.Context, l *coordv1.Lease, next state.Doc) error {
	var err error
	if l == nil {
		l = &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace}}
		setSpec(&l.Spec, next)
		_, err = s.leases.Create(ctx, l, metav1.CreateOptions{})
	} else {
		l = l.DeepCopy()
		setSpec(&l.Spec, next)
		_, err = s.leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	switch {
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return state.ErrLeaseConflict
	case err != nil:
		return s.fail("write", err)
	}
	return nil
}

// toDoc reads the lease out of the spec.
func toDoc(l *coordv1.Lease) state.Doc {
	sp := l.Spec
	var d state.Doc
	if sp.LeaseTransitions != nil {
		d.Epoch = int(*sp.LeaseTransitions)
	}
	if sp.RenewTime != nil {
		d.UpdatedAt = unixS(sp.RenewTime.Time)
	}
	d.ExpiresAt = d.UpdatedAt
	if sp.HolderIdentity != nil && *sp.HolderIdentity != "" && sp.LeaseDurationSeconds != nil {
		d.Holder = *sp.HolderIdentity
		d.ExpiresAt = d.UpdatedAt + float64(*sp.LeaseDurationSeconds)
	}
	return d
}

// setSpec writes next into the spec; a released lease (expiry not after
// its update) drops the holder.
func setSpec(sp *coordv1.LeaseSpec, next state.Doc) {
	epoch := int32(next.Epoch)
	if sp.LeaseTransitions == nil || *sp.LeaseTransitions != epoch || sp.AcquireTime == nil {
		sp.AcquireTime = microTime(next.UpdatedAt)
	}
	sp.LeaseTransitions = &epoch
	sp.RenewTime = microTime(next.UpdatedAt)
	secs := int32(math.Max(1, math.Ceil(next.ExpiresAt-next.UpdatedAt)))
	sp.LeaseDurationSeconds = &secs
	holder := next.Holder
	if next.ExpiresAt <= next.UpdatedAt {
		holder = ""
	}
	sp.HolderIdentity = &holder
}

func unixS(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func microTime(s float64) *metav1.MicroTime {
	sec, frac := math.Modf(s)
	return &metav1.MicroTime{Time: time.Unix(int64(sec), int64(frac*1e9)).UTC()}
}

func (s *Store) fail(op string, err error) error {
	hint := "is the API server reachable?"
	if apierrors.IsForbidden(err) {
		hint = "grant the router's service account get, create and update on leases (deploy/kubernetes has the Role)"
	}
	return fmt.Errorf("kubernetes lease %s: %s: %w; %s", s.Where(), op, err, hint)
}

package kubelease

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/state"
	"github.com/narwhal-go/narwhal/internal/state/leasetest"
)

// leaseServer speaks the API server's Lease routes for one namespace over
// HTTP, as kube-apiserver does: JSON objects, a resourceVersion moved on
// every write, 404/409 answered with a Status, and a 403 for a namespace
// the router may not use. The REST client, its encoding and its error
// decoding are then the real ones.
type leaseServer struct {
	mu     sync.Mutex // guards leases and rv
	leases map[string]coordv1.Lease
	rv     int
}

const leasesPath = "/apis/coordination.k8s.io/v1/namespaces/"

func (s *leaseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, leasesPath)
	ns, name, _ := strings.Cut(strings.TrimSuffix(rest, "/"), "/leases")
	name = strings.TrimPrefix(name, "/")
	switch {
	case !ok:
		status(w, http.StatusNotFound, "NotFound", "no route "+r.URL.Path)
		return
	case ns != "narwhal":
		status(w, http.StatusForbidden, "Forbidden", `leases.coordination.k8s.io is forbidden in namespace "`+ns+`"`)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var in coordv1.Lease
	if r.Method != http.MethodGet {
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			status(w, http.StatusBadRequest, "BadRequest", err.Error())
			return
		}
	}
	code, reason, msg := s.applyLocked(r.Method, name, &in)
	if code != http.StatusOK && code != http.StatusCreated {
		status(w, code, reason, msg)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(s.leases[in.Name])
}

// applyLocked does one request on the store: the status, and for errors
// their reason and message.
func (s *leaseServer) applyLocked(method, name string, in *coordv1.Lease) (int, string, string) {
	cur, exists := s.leases[name]
	switch {
	case method == http.MethodGet && !exists, method == http.MethodPut && !exists:
		return http.StatusNotFound, "NotFound", `leases.coordination.k8s.io "` + name + `" not found`
	case method == http.MethodGet:
		*in = cur
		return http.StatusOK, "", ""
	case method == http.MethodPost && s.leases[in.Name].Name != "":
		return http.StatusConflict, "AlreadyExists", `leases.coordination.k8s.io "` + in.Name + `" already exists`
	case method == http.MethodPut && in.ResourceVersion != cur.ResourceVersion:
		return http.StatusConflict, "Conflict", "the object has been modified; please apply your changes to the latest version and try again"
	}
	s.rv++
	in.ResourceVersion = strconv.Itoa(s.rv)
	s.leases[in.Name] = *in
	if method == http.MethodPost {
		return http.StatusCreated, "", ""
	}
	return http.StatusOK, "", ""
}

func status(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: int32(code), Reason: metav1.StatusReason(reason), Message: msg})
}

func restStore(t *testing.T, url, ns string) *Store {
	t.Helper()
	leases, err := ForConfig(&rest.Config{Host: url}, ns)
	if err != nil {
		t.Fatal(err)
	}
	return New(leases, ns, "router")
}

// The conformance suite over HTTP: the store as narwhal-serve runs it.
func TestRESTStoreConformance(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) func() state.LeaseStore {
		srv := httptest.NewServer(&leaseServer{leases: map[string]coordv1.Lease{}})
		t.Cleanup(srv.Close)
		return func() state.LeaseStore { return restStore(t, srv.URL, "narwhal") }
	})
}

// A namespace the service account may not use fails the claim with the
// fix in the message.
func TestRESTStoreForbidden(t *testing.T) {
	srv := httptest.NewServer(&leaseServer{leases: map[string]coordv1.Lease{}})
	defer srv.Close()
	l := leasetest.NewLease(t, restStore(t, srv.URL, "other"), "a", ports.NewFake(leasetest.T0), 1)
	_, err := l.Claim()
	if err == nil || !strings.Contains(err.Error(), "grant the router's service account") || !strings.Contains(err.Error(), "kubernetes:other/router") {
		t.Fatalf("claim in a forbidden namespace: %v; want the Role hint and the Lease named", err)
	}
}

package fleet

import (
	"net/url"
	"regexp"
	"strings"
)

// Lease selects where the routers' shared lease lives (recovery.lease):
// the lease file named by narwhal-serve --lease-path, an etcd cluster, or
// a Kubernetes coordination.k8s.io/v1 Lease. Every backend fences alike.
type Lease struct {
	Backend             string `json:"backend"`
	EtcdEndpoints       string `json:"etcd_endpoints"` // comma-separated client URLs
	EtcdKey             string `json:"etcd_key"`
	KubernetesNamespace string `json:"kubernetes_namespace"` // "": the pod's own namespace
	KubernetesName      string `json:"kubernetes_name"`
}

// Lease backends.
const (
	LeaseFile       = "file"
	LeaseEtcd       = "etcd"
	LeaseKubernetes = "kubernetes"
)

// Endpoints splits etcd_endpoints at commas, dropping blanks.
func (l Lease) Endpoints() []string {
	var out []string
	for _, e := range strings.Split(l.EtcdEndpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// dnsLabel is a Kubernetes object name or namespace (RFC 1123 label).
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// leaseBackend: the backend is one of three, and the one chosen has what
// it needs to connect.
func (c *Config) leaseBackend(ps *problems) {
	l := c.Recovery.Lease
	const p = "recovery.lease."
	if !ps.ok(p+"backend", p+"etcd_endpoints", p+"etcd_key", p+"kubernetes_namespace", p+"kubernetes_name") {
		return
	}
	switch l.Backend {
	case LeaseFile:
	case LeaseEtcd:
		c.etcdLease(ps)
	case LeaseKubernetes:
		if l.KubernetesNamespace != "" && !dnsLabel.MatchString(l.KubernetesNamespace) {
			ps.add(p+"kubernetes_namespace", "%skubernetes_namespace %q is not a Kubernetes namespace (lower-case letters, digits and '-')", p, l.KubernetesNamespace)
		}
		if !dnsLabel.MatchString(l.KubernetesName) {
			ps.add(p+"kubernetes_name", "%skubernetes_name %q is not a Kubernetes object name (lower-case letters, digits and '-')", p, l.KubernetesName)
		}
	default:
		ps.add(p+"backend", "%sbackend must be 'file', 'etcd' or 'kubernetes', got '%s'", p, l.Backend)
	}
}

func (c *Config) etcdLease(ps *problems) {
	l := c.Recovery.Lease
	const p = "recovery.lease."
	eps := l.Endpoints()
	if len(eps) == 0 {
		ps.add(p+"etcd_endpoints", "%setcd_endpoints is required with backend 'etcd': comma-separated client URLs such as http://etcd-0:2379", p)
	}
	for _, e := range eps {
		// TLS and etcd auth are not built: a client URL is plain http.
		if u, err := url.Parse(e); err != nil || u.Scheme != "http" || u.Host == "" {
			ps.add(p+"etcd_endpoints", "%setcd_endpoints entry %q is not an http:// URL with a host (TLS to etcd is not supported yet)", p, e)
		}
	}
	if !strings.HasPrefix(l.EtcdKey, "/") {
		ps.add(p+"etcd_key", "%setcd_key %q must start with '/'", p, l.EtcdKey)
	}
}

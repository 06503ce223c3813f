package fleet

import (
	"slices"
	"testing"
)

func TestLeaseBackendsThatValidate(t *testing.T) {
	cases := []struct {
		name  string
		lease Lease
		eps   []string
	}{
		{"file by default", Defaults().Recovery.Lease, nil},
		{"etcd", Lease{Backend: LeaseEtcd, EtcdEndpoints: " http://e0:2379,http://e1:2379 ,", EtcdKey: "/n/l", KubernetesName: "x"},
			[]string{"http://e0:2379", "http://e1:2379"}},
		{"kubernetes in the pod's namespace", Lease{Backend: LeaseKubernetes, EtcdKey: "/n", KubernetesName: "narwhal-router"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			c.Model = "m"
			c.SLO = SLO{TTFT: 1, TPOT: 0.1}
			c.Engines = []Engine{{IID: "p0", URL: "http://127.0.0.1:1", Role: Prefill}, {IID: "d0", URL: "http://127.0.0.1:2", Role: Decode}}
			c.Recovery.Lease = tc.lease
			if err := c.Validate("test"); err != nil {
				t.Fatal(err)
			}
			if got := tc.lease.Endpoints(); !slices.Equal(got, tc.eps) {
				t.Errorf("Endpoints() = %q, want %q", got, tc.eps)
			}
		})
	}
	if d := Defaults().Recovery.Lease; d.Backend != LeaseFile {
		t.Errorf("default backend %q, want file: old fleets keep the lease file", d.Backend)
	}
}

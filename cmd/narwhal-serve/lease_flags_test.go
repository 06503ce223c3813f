package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// The lease flags against recovery.lease: usage errors, exit 2, naming
// the fix.
func TestLeaseFlagsAgainstTheFleetsBackend(t *testing.T) {
	etcd := func(c *fleet.Config) {
		c.Recovery.Lease = fleet.Lease{Backend: fleet.LeaseEtcd, EtcdEndpoints: "http://127.0.0.1:1", EtcdKey: "/k", KubernetesName: "n"}
	}
	cases := []struct {
		name string
		mod  func(*fleet.Config)
		args []string
		want string
	}{
		{"standby without a lease", nil, []string{"--standby-of", "http://127.0.0.1:1"}, "--standby-of needs a lease"},
		{"lease file with the etcd backend", etcd, []string{"--lease-path", "l"}, `recovery.lease.backend is "etcd"`},
		{"etcd lease ttl too short", etcd, []string{"--lease-ttl", "1s"}, "--lease-ttl 1s must exceed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.mod)
			cmd := exec.Command(binary, append([]string{"--fleet", w.fleet, "--port", "0"}, tc.args...)...)
			out, _ := cmd.CombinedOutput()
			if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
				t.Fatalf("exit %d, want 2 and %q:\n%s", cmd.ProcessState.ExitCode(), tc.want, out)
			}
		})
	}
}

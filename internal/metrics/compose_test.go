package metrics

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/testkit"
)

// compose.yaml runs Grafana on the documented variables with its
// provisioning and the board mounted from files that exist. (Docker is
// not run here: the check is what the file names.)
func TestComposeProvisionsGrafana(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(deployDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := string(b)
	testkit.Mentions(t, "compose.yaml", c, "image: grafana/grafana:13.2.1", "network_mode: host",
		"${NARWHAL_GRAFANA_BIND_ADDRESS:-127.0.0.1}", `GF_SERVER_HTTP_PORT: "3000"`,
		"${NARWHAL_PROMETHEUS_URL:-http://127.0.0.1:9090}", "/var/lib/grafana/dashboards/narwhal.json:ro")
	mounts := regexp.MustCompile(`(?m)^\s*- (\./[^:]+):`).FindAllStringSubmatch(c, -1)
	if len(mounts) < 2 {
		t.Fatalf("compose.yaml mounts %v, want the provisioning and the board", mounts)
	}
	for _, m := range mounts {
		if _, err := os.Stat(filepath.Join(deployDir, m[1])); err != nil {
			t.Errorf("compose.yaml mounts %s, which does not exist: %v", m[1], err)
		}
	}
	ds, err := os.ReadFile(filepath.Join(deployDir, "grafana/provisioning/datasources/prometheus.yaml"))
	if err != nil || !strings.Contains(string(ds), "name: Prometheus") || !strings.Contains(string(ds), "${NARWHAL_PROMETHEUS_URL}") {
		t.Errorf("the datasource provisioning names no Prometheus at NARWHAL_PROMETHEUS_URL: %v\n%s", err, ds)
	}
}

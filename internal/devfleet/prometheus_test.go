package devfleet

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/testkit"
)

// A real Prometheus scrapes make run's router with the shipped alert
// rules loaded, and its query API returns the router's series: operators
// point the tools they already run at narwhal and it works.
func TestPrometheusScrapesTheRouter(t *testing.T) {
	prom := testkit.Tool(t, "prometheus", "Debian package prometheus: make tools, or apt-get install -y prometheus")
	run := start(t)
	base := run.base
	defer run.stop()
	// Traffic for the counters.
	for i := 0; i < 3; i++ {
		resp, err := http.Post(base+"/v1/completions", "application/json",
			strings.NewReader(`{"model":"narwhal/sim-llama-3-8b","prompt":"scrape me","max_tokens":2}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	dir := t.TempDir()
	rules, _ := filepath.Abs("../../deploy/observability/prometheus-alerts.yml")
	cfg := fmt.Sprintf(`global: {scrape_interval: 200ms, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: narwhal-router
    static_configs: [{targets: [%q]}]
`, rules, strings.TrimPrefix(base, "http://"))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := testkit.FreeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, prom, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if v, ok := testkit.PromQuery("http://"+addr, `narwhal_served_total{job="narwhal-router"}`); ok {
			if v != "3" {
				t.Errorf("narwhal_served_total = %s, want 3", v)
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("Prometheus never returned narwhal_served_total from the router:\n%s", logs.String())
}

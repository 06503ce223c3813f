// Package observe is `make observe`: a real Prometheus (Debian's package)
// with the shipped scrape configuration and alert rules, pointed at a
// router (NARWHAL_ROUTER_URL, default make run's) and at the engines of
// its fleet, on NARWHAL_PROMETHEUS_LISTEN_ADDRESS. It stages what
// Prometheus reads under one directory, prints where to look, and stops
// Prometheus cleanly when ctx ends (Ctrl-C).
package observe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Defaults of Options, and the variables that override them.
const (
	DefaultRouterURL = "http://127.0.0.1:8000"
	DefaultListen    = "127.0.0.1:9090"
	DefaultFleet     = "runs/dev/fleet.json" // what make run writes
	DefaultDir       = "runs/observability"
	DefaultDeploy    = "deploy/observability"
)

// Options say what to watch and where Prometheus runs.
type Options struct {
	RouterURL  string // origin Prometheus scrapes as job narwhal-router
	Listen     string // Prometheus's listener, host:port
	Fleet      string // fleet file whose engines become job engines; "" or missing: none
	Dir        string // staging root: prometheus/ (config, rules, targets) and data/
	Deploy     string // the shipped deploy/observability directory
	Prometheus string // the prometheus binary; default from PATH
	// ScrapeInterval and EvalInterval replace the shipped 5 s / 15 s (a
	// test's short cycles); AlertFor replaces every rule's for: (a test
	// seam: a firing alert in seconds). Empty keeps the shipped values.
	ScrapeInterval, EvalInterval, AlertFor string
	// Ready, when set, receives Prometheus's base URL once it is ready.
	Ready func(prometheusURL string)
}

// FromEnv fills Options from the environment (operations.md §7.9).
func FromEnv(lookup func(string) (string, bool)) Options {
	get := func(name, def string) string {
		if v, ok := lookup(name); ok && v != "" {
			return v
		}
		return def
	}
	return Options{RouterURL: get("NARWHAL_ROUTER_URL", DefaultRouterURL),
		Listen: get("NARWHAL_PROMETHEUS_LISTEN_ADDRESS", DefaultListen),
		Fleet:  get("NARWHAL_FLEET", DefaultFleet), Dir: DefaultDir, Deploy: DefaultDeploy}
}

// Run stages the configuration, starts Prometheus, waits until it is
// ready, prints the URLs to out and serves until ctx ends.
func Run(ctx context.Context, o Options, out io.Writer) error {
	if o.Prometheus == "" {
		p, err := exec.LookPath("prometheus")
		if err != nil {
			return errors.New("observe: prometheus is not installed: run make observe (it installs Debian's prometheus package) or apt-get install prometheus")
		}
		o.Prometheus = p
	}
	st, err := stage(o)
	if err != nil {
		return err
	}
	if err := free(o.Listen); err != nil {
		return err
	}
	cmd := exec.Command(o.Prometheus, "--config.file="+st.config, "--storage.tsdb.path="+filepath.Join(o.Dir, "data"),
		"--web.listen-address="+o.Listen)
	logs, err := os.Create(filepath.Join(o.Dir, "prometheus.log"))
	if err != nil {
		return fmt.Errorf("observe: %w", err)
	}
	defer logs.Close()
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("observe: start %s: %w", o.Prometheus, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	base := "http://" + o.Listen
	if err := ready(ctx, base, exited); err != nil {
		stop(cmd, exited)
		return fmt.Errorf("%w (its log: %s)", err, logs.Name())
	}
	banner(out, o, st, base)
	if o.Ready != nil {
		o.Ready(base)
	}
	select {
	case <-ctx.Done():
		return stop(cmd, exited)
	case err := <-exited:
		return fmt.Errorf("observe: prometheus exited: %v (its log: %s)", err, logs.Name())
	}
}

// free fails when something already listens on addr.
func free(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("observe: NARWHAL_PROMETHEUS_LISTEN_ADDRESS %s is taken (%v): stop what listens there or choose another address", addr, err)
	}
	return ln.Close()
}

// ready waits up to 60 s for /-/ready.
func ready(ctx context.Context, base string, exited <-chan error) error {
	c := &http.Client{Timeout: 2 * time.Second}
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); {
		if resp, err := c.Get(base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-exited:
			return fmt.Errorf("observe: prometheus exited before it was ready: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("observe: prometheus at %s not ready within 60 s", base)
}

// stop asks Prometheus to shut down (SIGINT flushes its head block) and
// kills it after 10 s.
func stop(cmd *exec.Cmd, exited <-chan error) error {
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case <-exited:
		return nil
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		return errors.New("observe: prometheus did not stop within 10 s of SIGINT; killed")
	}
}

func banner(out io.Writer, o Options, st staged, base string) {
	engines := fmt.Sprintf("%d engines from %s", st.engines, o.Fleet)
	if st.engines == 0 {
		engines = "no engines (no fleet at " + o.Fleet + "; set NARWHAL_FLEET)"
	}
	fmt.Fprintf(out, `Prometheus ready at %s   (scraping router %s and %s)
  dashboard       %s/narwhal/ui
  targets         %s/targets
  alerts          %s/alerts
  query           curl -fsSG %s/api/v1/query --data-urlencode 'query=up{job=~"narwhal-router|engines"}'
  Grafana         docker compose -f %s/compose.yaml up -d   (board provisioned; needs Docker)
  staged config   %s

Ctrl-C stops Prometheus.
`, base, o.RouterURL, engines, strings.TrimSuffix(o.RouterURL, "/"), base, base, base, o.Deploy, filepath.Dir(st.config))
}

package observe

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/narwhal-go/narwhal/internal/atomicfile"
	"github.com/narwhal-go/narwhal/internal/fleet"
)

// staged is what stage wrote.
type staged struct {
	config  string // prometheus.yml
	engines int
}

// target is one file_sd target group.
type target struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// stage writes <dir>/prometheus/{prometheus.yml,prometheus-alerts.yml,
// targets/router.json,targets/engines.json} from the shipped files.
func stage(o Options) (staged, error) {
	router, err := authority("NARWHAL_ROUTER_URL", o.RouterURL)
	if err != nil {
		return staged{}, err
	}
	engines, err := engineTargets(o.Fleet)
	if err != nil {
		return staged{}, err
	}
	dir := filepath.Join(o.Dir, "prometheus")
	if err := os.MkdirAll(filepath.Join(dir, "targets"), 0o755); err != nil {
		return staged{}, fmt.Errorf("observe: %w", err)
	}
	cfg, err := shipped(o.Deploy, "prometheus.yml", map[*regexp.Regexp]string{
		regexp.MustCompile(`(?m)^(\s*scrape_interval:\s*)\S+`):     o.ScrapeInterval,
		regexp.MustCompile(`(?m)^(\s*evaluation_interval:\s*)\S+`): o.EvalInterval,
	})
	if err != nil {
		return staged{}, err
	}
	rules, err := shipped(o.Deploy, "prometheus-alerts.yml", map[*regexp.Regexp]string{
		regexp.MustCompile(`(?m)^(\s*for:\s*)\S+`): o.AlertFor,
	})
	if err != nil {
		return staged{}, err
	}
	files := map[string]any{"targets/router.json": []target{{Targets: []string{router}}}, "targets/engines.json": engines}
	for name, v := range files {
		b, _ := json.MarshalIndent(v, "", "  ") // plain structs
		if err := atomicfile.Write(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
			return staged{}, fmt.Errorf("observe: %w", err)
		}
	}
	for name, b := range map[string][]byte{"prometheus.yml": cfg, "prometheus-alerts.yml": rules} {
		if err := atomicfile.Write(filepath.Join(dir, name), b, 0o644); err != nil {
			return staged{}, fmt.Errorf("observe: %w", err)
		}
	}
	return staged{config: filepath.Join(dir, "prometheus.yml"), engines: len(engines)}, nil
}

// shipped reads deploy/observability/name, replacing each pattern's value
// where a replacement is given.
func shipped(deploy, name string, repl map[*regexp.Regexp]string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(deploy, name))
	if err != nil {
		return nil, fmt.Errorf("observe: the shipped %s: %w (run make observe from the repository root)", name, err)
	}
	for re, v := range repl {
		if v != "" {
			b = re.ReplaceAll(b, []byte("${1}"+v))
		}
	}
	return b, nil
}

// authority is the host:port of an http URL with nothing else in it
// (operations.md §7.6).
func authority(what, raw string) (string, error) {
	u, err := url.Parse(raw)
	bad := err != nil || u.Scheme != "http" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
		strings.Trim(u.Path, "/") != "" || u.Port() == "" || u.Hostname() == ""
	if bad {
		return "", fmt.Errorf("observe: %s %q must be http://HOST:PORT with an explicit port and no credentials, path, query or fragment", what, raw)
	}
	return net.JoinHostPort(u.Hostname(), u.Port()), nil
}

// engineTargets are the fleet's engines as scrape targets labelled iid;
// none when there is no fleet file.
func engineTargets(path string) ([]target, error) {
	out := []target{}
	if path == "" {
		return out, nil
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	cfg, err := fleet.Load(path)
	if err != nil {
		return nil, fmt.Errorf("observe: NARWHAL_FLEET: %w", err)
	}
	for i, e := range cfg.Engines {
		a, err := authority(fmt.Sprintf("engines[%d].url", i), e.URL)
		if err != nil {
			return nil, err
		}
		out = append(out, target{Targets: []string{a}, Labels: map[string]string{"iid": e.IID}})
	}
	return out, nil
}

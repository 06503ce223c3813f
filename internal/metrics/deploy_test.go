package metrics

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/testkit"
)

// deployDir holds the shipped alert rules and dashboard; they consume the
// names this package exports, so their tests live here: a rename breaks
// them together.
const deployDir = "../../deploy/observability"

// TestAlertRulesWithPromtool runs promtool's syntax check and the rule
// unit tests. promtool comes from Debian's prometheus package:
// apt-get install -y prometheus.
func TestAlertRulesWithPromtool(t *testing.T) {
	promtool := testkit.Tool(t, "promtool", "Debian package prometheus: make tools, or apt-get install -y prometheus")
	for _, args := range [][]string{
		{"check", "rules", "prometheus-alerts.yml"},
		{"check", "config", "prometheus.yml"},
		{"test", "rules", "prometheus-alerts.test.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = deployDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

var seriesName = regexp.MustCompile(`narwhal_[a-z0-9_]+`)

// TestDeployFilesUseExportedSeries checks every narwhal_* name in the
// rules and the dashboard against the families this package exports.
func TestDeployFilesUseExportedSeries(t *testing.T) {
	for _, file := range []string{"prometheus-alerts.yml", "prometheus-alerts.test.yml", "grafana-dashboard.json"} {
		b, err := os.ReadFile(filepath.Join(deployDir, file))
		if err != nil {
			t.Fatal(err)
		}
		used := 0
		for _, name := range seriesName.FindAllString(string(b), -1) {
			if !exported(name) {
				t.Errorf("%s uses %s, which the router does not export", file, name)
			}
			used++
		}
		if used == 0 {
			t.Errorf("%s names no narwhal_* series", file)
		}
	}
}

func exported(name string) bool {
	if _, ok := families[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, found := strings.CutSuffix(name, suffix)
		if _, ok := families[base]; found && ok {
			return true
		}
	}
	return false
}

type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Schema     int    `json:"schemaVersion"`
	Templating struct {
		List []struct {
			Name, Type string
			Query      any
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource *struct {
			Type, UID string
		} `json:"datasource"`
		GridPos struct{ X, Y, W, H int } `json:"gridPos"`
		Targets []struct {
			Expr  string `json:"expr"`
			RefID string `json:"refId"`
		} `json:"targets"`
	} `json:"panels"`
}

func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(deployDir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana-dashboard.json is not JSON: %v", err)
	}
	if d.UID != "narwhal-router" || d.Title == "" || d.Schema < 36 {
		t.Errorf("uid %q title %q schemaVersion %d", d.UID, d.Title, d.Schema)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Name == "datasource" && v.Query != "prometheus" {
			t.Errorf("datasource variable query %v, want prometheus", v.Query)
		}
	}
	if vars["datasource"] != "datasource" || vars["router"] != "query" {
		t.Errorf("variables %v, want a prometheus datasource variable and a router query", vars)
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d repeats", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W <= 0 {
			t.Errorf("panel %q gridPos %+v leaves the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the datasource variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" {
				t.Errorf("panel %q has an empty query or refId", p.Title)
			}
			if strings.Contains(tg.Expr, "narwhal_") && !strings.Contains(tg.Expr, `instance=~"$router"`) {
				t.Errorf("panel %q query ignores the router variable: %s", p.Title, tg.Expr)
			}
		}
	}
}

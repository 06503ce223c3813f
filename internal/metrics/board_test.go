package metrics

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// boardQueries are every panel query of the shipped board.
func boardQueries(t *testing.T) []string {
	b, err := os.ReadFile(filepath.Join(deployDir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}

// engineFamilies are the families a vLLM-compatible engine exports: those
// of a simulated engine, which mirrors vLLM's names.
func engineFamilies(t *testing.T) map[string]bool {
	e, err := simengine.Start(simengine.Config{Model: "m", Profile: simengine.DefaultProfile("x")})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	_, body := testkit.Get(t, e.URL()+"/metrics")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("engine metrics do not parse: %v", err)
	}
	out := map[string]bool{}
	for name, f := range fams {
		out[name] = true
		if f.GetType().String() == "HISTOGRAM" {
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		}
	}
	return out
}

var vllmName = regexp.MustCompile(`vllm:[a-z0-9_:]+`)

// Every board query names series that exist: narwhal_* from this
// registry, vllm:* from a vLLM-compatible engine's exposition; and the
// board has engine panels.
func TestBoardQueriesNameExistingMetrics(t *testing.T) {
	engine := engineFamilies(t)
	vllmPanels := 0
	for _, q := range boardQueries(t) {
		for _, name := range seriesName.FindAllString(q, -1) {
			if !exported(name) {
				t.Errorf("board query names %s, which the router does not export: %s", name, q)
			}
		}
		names := vllmName.FindAllString(q, -1)
		for _, name := range names {
			if !engine[name] {
				t.Errorf("board query names %s, which a vLLM engine does not export: %s", name, q)
			}
		}
		if len(names) > 0 {
			vllmPanels++
		}
	}
	if vllmPanels < 5 {
		t.Errorf("%d board queries read the engines' own metrics, want the engine (vLLM) panels", vllmPanels)
	}
}

// Every board query parses as PromQL: promtool checks them as recording
// rules, with Grafana's variables replaced by what Grafana sends.
func TestBoardQueriesParseWithPromtool(t *testing.T) {
	promtool := testkit.Tool(t, "promtool", "Debian package prometheus: make tools, or apt-get install -y prometheus")
	vars := strings.NewReplacer("$__rate_interval", "1m", "$__range", "1h", "$__interval", "15s", "$router", ".*", "$iid", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: board\n    rules:\n")
	for i, q := range boardQueries(t) {
		expr, _ := json.Marshal(vars.Replace(q)) // a JSON string is a YAML string
		fmt.Fprintf(&rules, "      - record: board:query%d\n        expr: %s\n", i, expr)
	}
	path := filepath.Join(t.TempDir(), "board-rules.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput()
	if err != nil {
		t.Errorf("promtool check rules on the board's queries: %v\n%s", err, out)
	}
}

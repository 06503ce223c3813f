package devfleet

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/narwhal-go/narwhal/internal/check"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/profile"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs a dev fleet on a free port and returns its base URL and a
// stop function that waits for a clean shutdown.
func start(t *testing.T) (string, string, func()) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		done <- Run(ctx, Options{Dir: dir, Port: 0, Ready: func(u string) { ready <- u }}, &out)
	}()
	select {
	case u := <-ready:
		return u, dir, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("dev fleet did not stop cleanly: %v", err)
			}
			if !strings.Contains(out.String(), "OpenAI base URL") {
				t.Errorf("banner missing:\n%s", out.String())
			}
		}
	case err := <-done:
		cancel()
		t.Fatalf("dev fleet failed to start: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("dev fleet did not become ready")
	}
	return "", "", nil
}

func TestRunServesAndWritesItsFiles(t *testing.T) {
	base, dir, stop := start(t)
	// Preflight passes against the running dev fleet: it is contracted,
	// with a sidecar per engine.
	running, err := fleet.Load(filepath.Join(dir, "fleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	store, _ := profile.Load(running.Profiles.Path)
	rep := check.Run(context.Background(), check.Options{Fleet: running, Profiles: store, Ring: true, PaceWords: 512})
	if !rep.Passed() {
		t.Errorf("preflight against make run's fleet failed: %v (gates %+v)", rep.Failed, rep.Gates)
	}
	body := `{"model":"narwhal/sim-llama-3-8b","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Choices []struct{ Message struct{ Content string } }
	}
	json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if resp.StatusCode != 200 || got.Choices[0].Message.Content == "" {
		t.Fatalf("status %d, %+v", resp.StatusCode, got)
	}
	// The dev fleet is contracted and binds loopback: drain works.
	dr, err := http.Post(base+"/narwhal/lifecycle/drain", "application/json", strings.NewReader(`{"iid":"d1"}`))
	if err != nil {
		t.Fatal(err)
	}
	var lc struct {
		Engines map[string]struct{ State string } `json:"engines"`
	}
	json.NewDecoder(dr.Body).Decode(&lc)
	dr.Body.Close()
	if dr.StatusCode != 200 || lc.Engines["d1"].State != "draining" && lc.Engines["d1"].State != "drained" {
		t.Errorf("drain in the dev fleet: %d %+v", dr.StatusCode, lc.Engines["d1"])
	}
	stop()
	if _, err := os.Stat(filepath.Join(dir, "state.json")); err != nil {
		t.Errorf("the dev fleet wrote no handoff document: %v", err)
	}
	cfg, err := fleet.Load(filepath.Join(dir, "fleet.json"))
	if err != nil {
		t.Fatalf("generated fleet: %v", err)
	}
	if cfg.Serving.MaxAttempts != 2 || cfg.Serving.HandoffTimeoutS >= 30 || len(cfg.Engines) != 4 {
		t.Errorf("fleet: attempts %d handoff %v engines %d", cfg.Serving.MaxAttempts, cfg.Serving.HandoffTimeoutS, len(cfg.Engines))
	}
	if cfg.EngineContract == nil || !cfg.EngineContract.Complete() || cfg.Engines[0].AttestationURL == "" {
		t.Errorf("the dev fleet is not contracted: contract %+v, attestation_url %q", cfg.EngineContract, cfg.Engines[0].AttestationURL)
	}
	if _, err := profile.Load(filepath.Join(dir, "profiles.json")); err != nil {
		t.Errorf("generated profiles: %v", err)
	}
	j, err := journal.ReadFile(filepath.Join(dir, "journal.jsonl"))
	if err != nil || len(j.Requests) != 1 || j.Requests[0].Request.Terminal != journal.TerminalCompleted {
		t.Errorf("journal: %v, %d rows", err, len(j.Requests))
	}
}

// The official OpenAI JavaScript SDK streams a chat completion through the
// router. make test installs the SDK (scripts/node); CI fails without it.
func TestOpenAISDKStreamsThroughTheRouter(t *testing.T) {
	script, _ := filepath.Abs("../../scripts/node/openai-stream.mjs")
	sdk, _ := filepath.Abs("../../scripts/node/node_modules/openai/package.json")
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(sdk); err != nil || serr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node or the openai SDK is missing (run make test, which installs scripts/node): node %v, sdk %v", err, serr)
		}
		t.Skip("node or the openai npm package is not installed; make test installs them")
	}
	base, _, stop := start(t)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, script, base+"/v1", "narwhal/sim-llama-3-8b").CombinedOutput()
	if err != nil {
		t.Fatalf("the OpenAI SDK run failed: %v\n%s", err, out)
	}
	t.Logf("OpenAI SDK: %s", out)
}

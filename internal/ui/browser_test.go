package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/narwhal-go/narwhal/internal/devfleet"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

const adminToken = "browser-test-token"

// devFleet runs make run's fleet in process and returns its base URL.
func devFleet(t *testing.T) string {
	t.Helper()
	run, err := devfleet.Start(devfleet.Options{Dir: t.TempDir(), Engines: 4, AdminToken: adminToken}, &testkit.SyncBuffer{})
	if err != nil {
		t.Fatalf("dev fleet: %v", err)
	}
	t.Cleanup(func() {
		if err := run.Stop(); err != nil {
			t.Errorf("dev fleet did not stop cleanly: %v", err)
		}
	})
	return run.Base
}

// browser starts headless Chromium and collects what the page writes to
// the console at warning level or above: console.warn/error calls,
// uncaught exceptions and browser-log entries such as failed loads.
func browser(t *testing.T) (context.Context, func() []string) {
	chromium := testkit.Tool(t, "chromium", "Debian package chromium: make tools (scripts/apt-install.sh chromium)")
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1440, 1000),
		chromedp.UserDataDir(t.TempDir()))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, tcancel := context.WithTimeout(ctx, 50*time.Second)
	t.Cleanup(func() { tcancel(); cancel(); acancel() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	var mu sync.Mutex
	var problems []string
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			switch m.Type {
			case chromedp.ConsoleWarning, chromedp.ConsoleError, chromedp.ConsoleException:
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s: %s (%s)", m.Type, m.Text, m.URL))
				mu.Unlock()
			}
		}
	}()
	return ctx, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string{}, problems...) }
}

// roles reads every engine tile's role from the page.
func roles(t *testing.T, ctx context.Context) map[string]string {
	js := `Object.fromEntries([...document.querySelectorAll('.engine')].map(e => [e.dataset.iid, e.dataset.role]))`
	out, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](js))
	if err != nil {
		t.Fatalf("read roles: %v", err)
	}
	return out
}

// until polls cond every 200 ms for up to limit.
func until(limit time.Duration, cond func() bool) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// The dashboard in headless Chromium against make run's fleet: loads
// without console errors, shows every engine with its role, and follows a
// forced role flip and a burst of traffic.
func TestDashboardInChromium(t *testing.T) {
	base := devFleet(t)
	ctx, problems := browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`.engine[data-iid="d1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#conn.up`))); err != nil {
		t.Fatalf("dashboard did not render: %v", err)
	}
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	if !strings.HasSuffix(loc, "/narwhal/ui") {
		t.Errorf("GET / landed on %s, want /narwhal/ui", loc)
	}
	want := map[string]string{"p0": "prefill", "p1": "prefill", "d0": "decode", "d1": "decode"}
	if got := roles(t, ctx); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("engines on the page %v, want %v", got, want)
	}
	forceFlip(t, base)
	if !until(15*time.Second, func() bool { r := roles(t, ctx); return r["p0"] == "decode" || r["p1"] == "decode" }) {
		t.Errorf("no prefill engine shown as decode after both decode engines were drained: %v", roles(t, ctx))
	}
	flips, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#flips li:not(.empty)').length`))
	if flips == 0 {
		t.Error("the flip timeline lists no flip")
	}
	stop := burst(base)
	defer stop()
	if !until(12*time.Second, func() bool { return figure(t, ctx, "#load-prefill")+figure(t, ctx, "#load-decode") > 0 }) {
		t.Error("pool load stayed 0.00 on the page during a burst of traffic")
	}
	if !until(10*time.Second, func() bool { return figure(t, ctx, "#served") > 0 }) {
		t.Error("served count stayed 0 during the burst")
	}
	screenshot(t, ctx) // mid-burst: loads, latencies and the flip on screen
	stop()
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged %d problems:\n%s", len(p), strings.Join(p, "\n"))
	}
}

// forceFlip drains both decode engines: the decode floor then moves a
// prefill engine to decode.
func forceFlip(t *testing.T, base string) {
	for _, iid := range []string{"d0", "d1"} {
		req, _ := http.NewRequest(http.MethodPost, base+"/narwhal/lifecycle/drain", strings.NewReader(`{"iid":"`+iid+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body json.RawMessage
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("drain %s: %d %s", iid, resp.StatusCode, body)
		}
	}
}

// burst keeps 12 clients sending completions until stopped.
func burst(base string) func() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	body := `{"model":"narwhal/sim-llama-3-8b","prompt":"` + strings.Repeat("load ", 400) + `","max_tokens":64}`
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}()
	}
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }
}

// figure reads a number shown in the element sel.
func figure(t *testing.T, ctx context.Context, sel string) float64 {
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	v, _ := strconv.ParseFloat(strings.Fields(s + " x")[0], 64)
	return v
}

func screenshot(t *testing.T, ctx context.Context) {
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(t.ArtifactDir(), "dashboard.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

package router

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// The official JS SDK running in a browser page (dangerouslyAllowBrowser)
// on an origin serving.cors_origins lists gets its completion; the same
// SDK on an unlisted origin cannot make the router serve anything.
func TestJSSDKInABrowserFollowsCORSOrigins(t *testing.T) {
	chromium := testkit.Tool(t, "chromium", "Debian package chromium: make tools (scripts/apt-install.sh chromium)")
	_, dir := testkit.NodeSDK(t)
	sdk := filepath.Join(dir, "node_modules", "openai")
	listed, unlisted := sdkPage(t, sdk), sdkPage(t, sdk)
	h := newHarness(t, pd, func(c *fleet.Config) { c.Serving.CORSOrigins = []string{listed.URL} })
	f := h.front()
	bctx := headless(t, chromium)
	call := func(page *httptest.Server) string {
		if err := chromedp.Do(bctx, chromedp.Navigate(page.URL+"/")); err != nil {
			t.Fatalf("chromium: %v", err)
		}
		js := `(async () => {
  const { default: OpenAI } = await import('/openai/index.mjs');
  const client = new OpenAI({ baseURL: ` + jsString(f.srv.URL+"/v1") + `, apiKey: 'unused', dangerouslyAllowBrowser: true, maxRetries: 0, timeout: 10000 });
  try {
    const c = await client.completions.create({ model: 'sim-model', prompt: 'from a page', max_tokens: 2 });
    return 'served ' + c.usage.completion_tokens;
  } catch (e) { return 'failed: ' + e.constructor.name; }
})()`
		out, err := chromedp.Run(bctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("page script: %v", err)
		}
		return out
	}
	if got := call(listed); got != "served 2" {
		t.Errorf("SDK on the listed origin: %q, want served 2", got)
	}
	if got := call(unlisted); !strings.HasPrefix(got, "failed") {
		t.Errorf("SDK on an unlisted origin: %q, want a failure", got)
	}
	if n := f.count("POST /v1/completions"); n != 1 {
		t.Errorf("the router saw %d completion POSTs, want 1 (the unlisted origin's is stopped at its preflight)", n)
	}
	rows := h.journalRows(1)
	if len(rows) != 1 || rows[0].Terminal != journal.TerminalCompleted {
		t.Errorf("journal %v, want the listed origin's completion only", terminals(rows))
	}
}

// sdkPage is an origin serving an empty page and the SDK's ES modules
// under /openai/.
func sdkPage(t *testing.T, sdk string) *httptest.Server {
	mux := http.NewServeMux()
	mux.Handle("/openai/", http.StripPrefix("/openai/", http.FileServer(http.Dir(sdk))))
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<!doctype html><title>an SDK page</title>")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// headless starts chromium for t, stopped when t ends.
func headless(t *testing.T, chromium string) context.Context {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	bctx, tcancel := context.WithTimeout(bctx, 40*time.Second)
	t.Cleanup(func() { tcancel(); bcancel(); acancel() })
	return bctx
}

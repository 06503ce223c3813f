package simengine

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/narwhal-go/narwhal/internal/kvevents"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// Each simulated engine publishing KV events leaves zmq4's PUB writer
// parked (kvevents.ParkedPubWriter).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction(kvevents.ParkedPubWriter))
}

// fastProfile keeps real-clock tests quick: 1 ms prefill, 0.2 ms tokens.
func fastProfile() profile.Row {
	p := DefaultProfile("sim-0")
	p.TTFTA, p.TTFTB, p.TTFTC = 0, 0, 0.001
	p.TPOTSlope, p.TPOTIntercept = 1e-9, 0.0002
	zero := 0.0
	p.TPOTRequestSlope = &zero
	return p
}

func startEngine(t testing.TB, mod func(*Config)) *Engine {
	t.Helper()
	c := Config{Model: "sim-model", Profile: fastProfile(), KVCapacityTokens: 65536}
	if mod != nil {
		mod(&c)
	}
	e, err := Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// client bounds the requests tests send without testkit (those that
// expect a transport error or stream).
var client = &http.Client{Timeout: 20 * time.Second}

// post sends body as JSON; hdr are name, value pairs set after the
// Content-Type, so a test may override it.
func post(t testing.TB, url string, body any, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	return postRaw(t, url, b, append([]string{"Content-Type", "application/json"}, hdr...)...)
}

func postRaw(t testing.TB, url string, raw []byte, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(raw))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return testkit.Do(t, req)
}

func jsonEncode(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

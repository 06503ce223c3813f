package attest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/kvevents"
	"github.com/narwhal-go/narwhal/internal/residency"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit/simkit"
)

func TestResidencyRoutes(t *testing.T) {
	plain := simkit.Sidecar(t, startEngine(t), "127.0.0.1:0")
	for _, path := range []string{"/v1/residency", "/v1/residency/events?after=-1"} {
		if code, b := get(t, plain.URL()+path); code != 404 || !strings.Contains(string(b), residency.NoEventsError) {
			t.Errorf("%s without cache events: %d %s, want 404 %q", path, code, b, residency.NoEventsError)
		}
	}
	e, err := simengine.Start(simengine.Config{Model: "m", Profile: simengine.DefaultProfile("e0"),
		Prefix: simengine.PrefixCache{Enabled: true, KVEvents: &kvevents.Config{Enable: true,
			Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	s := simkit.Sidecar(t, e, "127.0.0.1:0")
	snap := func() residency.Snapshot {
		var out residency.Snapshot
		code, b := get(t, s.URL()+"/v1/residency")
		if code != 200 || json.Unmarshal(b, &out) != nil {
			t.Fatalf("snapshot: %d %s", code, b)
		}
		return out
	}
	waitFor(t, "residency known", func() bool { return snap().Known })
	body := `{"model":"m","prompt":"` + strings.Repeat("the tide comes in ", 20) + `","max_tokens":1}`
	resp, err := http.Post(e.URL()+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, "the stored blocks", func() bool { s := snap(); return len(s.Groups) == 1 && len(s.Groups[0].Identities) > 0 })
	got := snap()
	if got.Hashing == nil || got.Hashing.Algo != "sha256" || got.Epoch == "" || got.BlockSize != 16 {
		t.Errorf("snapshot %+v: want sha256 hashing, an epoch and block size 16", got)
	}
	if code, b := get(t, s.URL()+"/v1/residency/events?after=-1"); code != 200 || !strings.Contains(string(b), `"stored"`) {
		t.Errorf("events after -1: %d %s", code, b)
	}
	for _, q := range []string{"?after=999", "?after=x"} {
		code, _ := get(t, s.URL()+"/v1/residency/events"+q)
		if want := map[string]int{"?after=999": 410, "?after=x": 400}[q]; code != want {
			t.Errorf("events%s: %d, want %d", q, code, want)
		}
	}
	e.Restart()
	if code, b := get(t, s.URL()+"/v1/residency"); code != 503 || !strings.Contains(string(b), "restart the attestation sidecar") {
		t.Errorf("after the engine restarted: %d %s, want 503", code, b)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

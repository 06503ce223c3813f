package vllm

import (
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

func TestEngineAuthRefusalIsTheRoutersFault(t *testing.T) {
	cases := []struct {
		status     int
		auth       bool
		reason     fault.Reason
		transient  bool
		msgMention string
	}{
		{401, true, fault.EngineError, true, "engine_api_key_env"},
		{403, true, fault.EngineError, true, "engine_api_key_env"},
		{400, false, fault.EngineRejected, false, "HTTP 400"},
		{404, false, fault.EngineRejected, false, "HTTP 404"},
		{500, false, fault.EngineError, true, "HTTP 500"},
	}
	for _, c := range cases {
		e := statusError("prefill", c.status, `{"error":"Unauthorized"}`)
		if e.AuthFailed() != c.auth || e.Reason != c.reason || e.Transient() != c.transient || !strings.Contains(e.Msg, c.msgMention) {
			t.Errorf("HTTP %d: auth %v reason %s transient %v msg %q; want auth %v reason %s transient %v, msg naming %q",
				c.status, e.AuthFailed(), e.Reason, e.Transient(), e.Msg, c.auth, c.reason, c.transient, c.msgMention)
		}
	}
	var none *fault.Error
	if none.AuthFailed() {
		t.Error("a nil error reports an auth failure")
	}
}

func TestHandshakeRefusalParsing(t *testing.T) {
	a, b := strings.Repeat("a", 64), strings.Repeat("B", 64)
	cases := []struct {
		name          string
		phase         fault.Phase
		msg           string
		ok            bool
		local, remote string
	}{
		{"hash mismatch", "decode", "engine reported an error inside the stream: NIXL compatibility hash mismatch. Local: " + a + ", Remote: " + b, true, a, strings.ToLower(b)},
		{"truncated", "decode", "NIXL compatibility hash mismatch. Local: " + a + ", Rem…", true, a, ""},
		{"payload", "decode", "engine reported an error inside the stream: Failed to decode NixlHandshakePayload. This likely indicates…", true, "", ""},
		{"other stream error", "decode", "engine reported an error inside the stream: boom", false, "", ""},
		{"prefill phase", "prefill", "NIXL compatibility hash mismatch. Local: " + a, false, "", ""},
	}
	for _, c := range cases {
		h, ok := HandshakeRefusal(&fault.Error{Phase: c.phase, Msg: c.msg})
		if ok != c.ok || h.LocalHash != c.local || h.RemoteHash != c.remote {
			t.Errorf("%s: %+v %v, want ok %v local %q remote %q", c.name, h, ok, c.ok, c.local, c.remote)
		}
	}
}

// A consumer launched with another dtype refuses the producer's KV; the
// client classifies the stream's error as a handshake refusal carrying
// both engines' hashes.
func TestHandshakeRefusalFromSimengine(t *testing.T) {
	fl, err := simengine.StartFleet(2, simengine.Config{Model: "m", Profile: simengine.DefaultProfile("x")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fl.Close() })
	odd := simengine.DefaultCompat("m")
	odd.DType = "torch.float16"
	fl.Engines[1].RestartAs(odd)
	ctx, a, b := pdClients(t, fl)
	s := prefillDecode(t, ctx, a, b)
	defer s.Close()
	var next error
	for next == nil {
		var ev Event
		if ev, next = s.Next(); ev.Done {
			t.Fatal("the decode leg succeeded with KV from an incompatible producer")
		}
	}
	e := fault.As(next)
	hs, ok := HandshakeRefusal(e)
	want := Handshake{LocalHash: simengine.CompatibilityHash(fl.Engines[1].Compat()), RemoteHash: simengine.CompatibilityHash(fl.Engines[0].Compat())}
	if !ok || hs != want {
		t.Fatalf("refusal %+v %v from %q, want %+v", hs, ok, e.Msg, want)
	}
}

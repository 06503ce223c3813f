package main

import (
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/simengine"
)

func TestPrefixFlags(t *testing.T) {
	ev := `{"enable_kv_cache_events":true,"endpoint":"tcp://*:5557","replay_endpoint":"tcp://127.0.0.1:5558"}`
	cases := []struct {
		name          string
		p             prefixFlags
		i             int
		pub, rep, err string
	}{
		{"off", prefixFlags{}, 0, "", "", ""},
		{"engine 0", prefixFlags{enable: true, events: ev}, 0, "tcp://*:5557", "tcp://127.0.0.1:5558", ""},
		{"engine 2 moves both ports by 4", prefixFlags{enable: true, events: ev}, 2, "tcp://*:5561", "tcp://127.0.0.1:5562", ""},
		{"events without caching", prefixFlags{events: ev}, 0, "", "", "needs --enable-prefix-caching"},
		{"not JSON", prefixFlags{enable: true, events: "{"}, 0, "", "", "--kv-events-config"},
		{"ipc", prefixFlags{enable: true, events: `{"endpoint":"ipc:///tmp/x"}`}, 1, "", "", "tcp"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c simengine.Config
			err := tc.p.apply(&c, tc.i)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Prefix.Enabled != tc.p.enable {
				t.Errorf("enabled %v", c.Prefix.Enabled)
			}
			if tc.pub != "" && (c.Prefix.KVEvents.Endpoint != tc.pub || c.Prefix.KVEvents.ReplayEndpoint != tc.rep) {
				t.Errorf("endpoints %s %s, want %s %s", c.Prefix.KVEvents.Endpoint, c.Prefix.KVEvents.ReplayEndpoint, tc.pub, tc.rep)
			}
		})
	}
}

// --max-num-seqs reaches the simulated scheduler; unset keeps its default.
func TestMaxNumSeqsFlag(t *testing.T) {
	for _, n := range []int{0, 4096} {
		f := &simFlags{maxNumSeqs: n, failStartup: ""}
		c, err := f.config(nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if c.MaxNumSeqs != n {
			t.Errorf("--max-num-seqs %d: config has %d", n, c.MaxNumSeqs)
		}
	}
}

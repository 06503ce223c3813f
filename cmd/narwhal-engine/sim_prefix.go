package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/narwhal-go/narwhal/internal/kvevents"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

// prefixFlags are vLLM's prefix-caching flags on a simulated engine.
type prefixFlags struct {
	enable, details bool
	algo, events    string
}

func (p *prefixFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&p.enable, "enable-prefix-caching", false, "cache prompt blocks by vLLM's chained block hash (vLLM's default is on; the simulator's is off); the hash seed is $PYTHONHASHSEED, else \"0\"")
	fs.StringVar(&p.algo, "prefix-caching-hash-algo", string(kvevents.SHA256), "sha256 (vLLM's default: pickle) or sha256_cbor")
	fs.BoolVar(&p.details, "enable-prompt-tokens-details", false, "report usage.prompt_tokens_details.cached_tokens")
	fs.StringVar(&p.events, "kv-events-config", "", `publish KV cache events, e.g. '{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5558"}' (tcp only; sim-fleet adds 2 to both ports per engine); needs --enable-prefix-caching`)
}

// apply sets engine i's prefix cache.
func (p *prefixFlags) apply(c *simengine.Config, i int) error {
	if !p.enable {
		if p.events != "" {
			return fmt.Errorf("--kv-events-config needs --enable-prefix-caching")
		}
		return nil
	}
	c.Prefix = simengine.PrefixCache{Enabled: true, HashAlgo: kvevents.Algo(p.algo), HashSeed: os.Getenv("PYTHONHASHSEED"),
		PromptTokensDetails: p.details}
	if p.events == "" {
		return nil
	}
	var kc kvevents.Config
	if err := json.Unmarshal([]byte(p.events), &kc); err != nil {
		return fmt.Errorf("--kv-events-config: %v (pass a JSON object like vLLM's)", err)
	}
	if kc.Publisher != "" && kc.Publisher != "zmq" {
		return fmt.Errorf("--kv-events-config: publisher %q: only zmq is simulated", kc.Publisher)
	}
	var err error
	if kc.Endpoint, err = offsetPort(kc.Endpoint, 2*i); err == nil {
		kc.ReplayEndpoint, err = offsetPort(kc.ReplayEndpoint, 2*i)
	}
	if err != nil {
		return fmt.Errorf("--kv-events-config: %v", err)
	}
	c.Prefix.KVEvents = &kc
	return nil
}

// offsetPort moves a tcp endpoint's port by d (0 stays 0: a free port).
func offsetPort(endpoint string, d int) (string, error) {
	if endpoint == "" || d == 0 {
		return endpoint, nil
	}
	addr, err := kvevents.TCPAddr(endpoint)
	if err != nil {
		return "", err
	}
	host, port, _ := net.SplitHostPort(addr)
	n, err := strconv.Atoi(port)
	if err != nil || n == 0 {
		return endpoint, err
	}
	if host == "" && strings.Contains(endpoint, "*") {
		host = "*"
	}
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(n+d)), nil
}

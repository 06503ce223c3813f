package main

import (
	"os"

	"github.com/spf13/pflag"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/kvevents"
)

// kvFlags enable the residency routes: where the engine publishes its KV
// cache events (its --kv-events-config endpoints) and how it hashes
// blocks.
type kvFlags struct {
	endpoint, replay, topic, model string
	algo, seed                     string
	blockSize                      int
}

func (k *kvFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&k.endpoint, "kv-events", "", "engine's KV cache event PUB endpoint, tcp://host:port (its --kv-events-config endpoint); enables /v1/residency")
	fs.StringVar(&k.replay, "kv-events-replay", "", "engine's replay endpoint, tcp://host:port (its replay_endpoint); without it a missed batch loses residency until a cache reset")
	fs.StringVar(&k.topic, "kv-topic", "", "topic the engine publishes on (its --kv-events-config topic)")
	fs.StringVar(&k.model, "model", "", "served model name; required with --kv-events")
	fs.StringVar(&k.algo, "hash-algo", string(kvevents.SHA256), "engine's --prefix-caching-hash-algo: sha256 or sha256_cbor")
	fs.StringVar(&k.seed, "hash-seed", os.Getenv("PYTHONHASHSEED"), "engine's PYTHONHASHSEED (default: this process's); required with --kv-events")
	fs.IntVar(&k.blockSize, "block-size", 16, "engine's --block-size")
}

func (k *kvFlags) check() error {
	switch {
	case k.endpoint == "":
		return nil
	case k.model == "":
		return cli.Usage("--model is required with --kv-events: name the engine's served model")
	case k.seed == "":
		return cli.Usage("--hash-seed is required with --kv-events: start vLLM with PYTHONHASHSEED set and pass the same value (without it vLLM's block hashes are random per process)")
	}
	if _, err := kvevents.TCPAddr(k.endpoint); err != nil {
		return cli.Usage("--kv-events: %v", err)
	}
	if k.replay != "" {
		if _, err := kvevents.TCPAddr(k.replay); err != nil {
			return cli.Usage("--kv-events-replay: %v", err)
		}
	}
	return nil
}

// subscription is the event subscription and hasher; nil hasher when the
// engine publishes no cache events.
func (k *kvFlags) subscription() (kvevents.Subscriber, *kvevents.Hasher, error) {
	if k.endpoint == "" {
		return kvevents.Subscriber{}, nil, nil
	}
	h, err := kvevents.NewHasher(kvevents.Algo(k.algo), k.blockSize, k.seed)
	if err != nil {
		return kvevents.Subscriber{}, nil, err
	}
	return kvevents.Subscriber{Endpoint: k.endpoint, ReplayEndpoint: k.replay, Topic: k.topic}, h, nil
}

package launch

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// Schema of a rendered plan file.
const (
	Schema        = "narwhal.engine-launch-plan"
	SchemaVersion = 1
)

// Options are the launcher's own choices, outside the fleet.
type Options struct {
	BindHost        string // vllm serve --host; default 0.0.0.0
	SideChannelBase int    // engine i's NIXL side channel is base+i; default 5600
	// AllowUnauthenticated renders engines without an API key when the
	// fleet names no credential variable (otherwise Plan refuses).
	AllowUnauthenticated bool
	// Memory, when set, is the calculator's advice (narwhal plan) that
	// every engine's command carries as --max-model-len and
	// --gpu-memory-utilization.
	Memory *MemoryAdvice
}

// MemoryAdvice is what the memory calculator computed for the fleet's
// model on its hardware: values, never text from a log or a file.
type MemoryAdvice struct {
	MaxModelLen          int64
	GPUMemoryUtilization float64
	// DataParallel (> 1) and ExpertParallel are the layout the advice was
	// computed for; the command carries them as vLLM's
	// --data-parallel-size and --enable-expert-parallel.
	DataParallel   int
	ExpertParallel bool
}

// Engine is one engine's plan.
type Engine struct {
	IID       string            `json:"iid"`
	Argv      []string          `json:"argv"`
	Env       map[string]string `json:"env"`
	APIKeyEnv string            `json:"api_key_env"` // the variable's name; its value is never written
	// Unauthenticated marks a plan rendered with --allow-unauthenticated:
	// vLLM serves every route to anyone who reaches its port.
	Unauthenticated bool `json:"unauthenticated"`
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Plan renders every engine's plan from cfg.
func Plan(cfg *fleet.Config, o Options) ([]Engine, error) {
	if o.BindHost == "" {
		o.BindHost = "0.0.0.0"
	}
	if o.SideChannelBase <= 0 {
		o.SideChannelBase = 5600
	}
	if k := cfg.Engine.EngineAPIKeyEnv; k != "" && !envName.MatchString(k) {
		return nil, fmt.Errorf("engine.engine_api_key_env %q is not a shell variable name", k)
	}
	if cfg.Engine.EngineAPIKeyEnv == "" && !o.AllowUnauthenticated {
		return nil, fmt.Errorf("engine.engine_api_key_env is empty: the plan would start vllm serve --host %s with no API key; set engine.engine_api_key_env to the variable holding the engine key (e.g. NARWHAL_ENGINE_KEY), or pass --allow-unauthenticated if the network boundary protects the engines", o.BindHost)
	}
	var out []Engine
	for i, e := range cfg.Engines {
		p, err := enginePlan(cfg, e, o, o.SideChannelBase+i)
		if err != nil {
			return nil, fmt.Errorf("engines[%d] (iid %q): %w", i, e.IID, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// safeIID reports whether iid can name a directory inside the launch
// directory and sit in a shell comment: no separator, no dot-only name,
// no control character.
func safeIID(iid string) bool {
	if iid == "" || iid == "." || iid == ".." || strings.ContainsAny(iid, `/\`) {
		return false
	}
	return !strings.ContainsFunc(iid, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

func enginePlan(cfg *fleet.Config, e fleet.Engine, o Options, scPort int) (Engine, error) {
	if !safeIID(e.IID) {
		return Engine{}, errors.New("the iid cannot name a launch directory: use letters, digits, '-', '_' or '.' (no '/', no control characters)")
	}
	host, port, err := hostPort(e.URL)
	if err != nil {
		return Engine{}, err
	}
	tp := 1
	if cfg.Hardware != nil {
		tp = cfg.Hardware.TensorParallel
	}
	kv, _ := json.Marshal(kvTransferConfig(cfg.EngineContract))
	argv := []string{"vllm", "serve", cfg.Model, "--served-model-name", cfg.Model, "--host", o.BindHost,
		"--port", strconv.Itoa(port), "--tensor-parallel-size", strconv.Itoa(tp), "--kv-transfer-config", string(kv)}
	if m := o.Memory; m != nil {
		argv = append(argv, "--max-model-len", strconv.FormatInt(m.MaxModelLen, 10),
			"--gpu-memory-utilization", strconv.FormatFloat(m.GPUMemoryUtilization, 'f', -1, 64))
		if m.DataParallel > 1 {
			argv = append(argv, "--data-parallel-size", strconv.Itoa(m.DataParallel))
		}
		if m.ExpertParallel {
			argv = append(argv, "--enable-expert-parallel")
		}
	}
	if k := cfg.EngineContract; k != nil {
		if k.ModelDtype != "" {
			argv = append(argv, "--dtype", k.ModelDtype)
		}
		if k.KVCacheDtype != "" {
			argv = append(argv, "--kv-cache-dtype", k.KVCacheDtype)
		}
	}
	env := map[string]string{"VLLM_NIXL_SIDE_CHANNEL_HOST": host, "VLLM_NIXL_SIDE_CHANNEL_PORT": strconv.Itoa(scPort)}
	return Engine{IID: e.IID, Argv: argv, Env: env, APIKeyEnv: cfg.Engine.EngineAPIKeyEnv, Unauthenticated: cfg.Engine.EngineAPIKeyEnv == ""}, nil
}

// hostPort takes the engine URL apart into typed values: only the host
// name and an integer port reach the plan.
func hostPort(raw string) (string, int, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return "", 0, fmt.Errorf("url %q has no host", raw)
	}
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil || port <= 0 || port > 65535 {
			return "", 0, fmt.Errorf("url %q has an invalid port", raw)
		}
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil && !envName.MatchString(strings.ReplaceAll(strings.ReplaceAll(u.Hostname(), ".", "_"), "-", "_")) {
		return "", 0, fmt.Errorf("url %q host is neither an IP nor a DNS name", raw)
	}
	return u.Hostname(), port, nil
}

// kvTransferConfig is NixlConnector with kv_both, so every engine can take
// either role, and the handshake compatibility check kept on.
func kvTransferConfig(k *fleet.EngineContract) map[string]any {
	connector, role := "NixlConnector", "kv_both"
	if k != nil && k.Connector != "" {
		connector = k.Connector
	}
	if k != nil && k.KVRole != "" {
		role = k.KVRole
	}
	return map[string]any{"kv_connector": connector, "kv_role": role,
		"kv_connector_extra_config": map[string]any{"enforce_handshake_compat": true}}
}

// Script is the plan as a POSIX shell script: every value quoted, the
// credential read from the named variable at launch time.
func (p Engine) Script() string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# narwhal-engine plan: engine " + Quote(p.IID) + "\nset -eu\n")
	if p.Unauthenticated {
		b.WriteString("# WARNING: UNAUTHENTICATED. Rendered with --allow-unauthenticated: vLLM serves every\n" +
			"# route to anyone who reaches its port. Set engine.engine_api_key_env and re-plan to fix.\n" +
			"echo " + Quote("narwhal-engine plan: WARNING: engine "+p.IID+" starts without an API key") + " >&2\n")
	}
	keys := make([]string, 0, len(p.Env))
	for k := range p.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString("export " + k + "=" + Quote(p.Env[k]) + "\n")
	}
	if p.APIKeyEnv != "" {
		// vLLM reads VLLM_API_KEY; the plan names the variable, never its
		// value, and keeps the key off argv (ps shows a command line).
		fmt.Fprintf(&b, ": \"${%s:?set %s to the engine credential}\"\nexport VLLM_API_KEY=\"$%s\"\n", p.APIKeyEnv, p.APIKeyEnv, p.APIKeyEnv)
	}
	b.WriteString("exec " + Join(p.Argv) + "\n")
	return b.String()
}

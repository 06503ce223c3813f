package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/launch"
)

// Plan file identity (--plan).
const (
	FileSchema        = "narwhal.diagnose.plan"
	FileSchemaVersion = 1
)

// File is what an operator's plan file gives: the broken plan and,
// optionally, the model directory the memory calculator reads.
type File struct {
	Plan Plan
	// ModelDir is a local directory with config.json and the safetensors
	// headers ("" when not given). It is a path for the calculator, never
	// rendered.
	ModelDir string
	// Unmodelled are the flags of a launch plan's argv this package does
	// not model (names only, for a warning); a rendered command omits them.
	Unmodelled []string
}

// fileJSON is the narwhal.diagnose.plan document.
type fileJSON struct {
	Schema        string `json:"schema"`
	SchemaVersion int    `json:"schema_version"`
	ModelDir      string `json:"model_dir"`
	Plan          Plan   `json:"plan"`
}

type launchJSON struct {
	Schema        string `json:"schema"`
	SchemaVersion int    `json:"schema_version"`
	Engine        struct {
		Argv []string `json:"argv"`
	} `json:"engine"`
}

// Parse reads a plan file: a narwhal.diagnose.plan document, or the
// launch.json of `narwhal-engine plan` (narwhal.engine-launch-plan),
// whose argv is read flag by flag.
func Parse(b []byte) (File, error) {
	var head struct {
		Schema        string `json:"schema"`
		SchemaVersion int    `json:"schema_version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return File{}, fmt.Errorf("plan file: not JSON: %w", err)
	}
	switch head.Schema {
	case FileSchema:
		if head.SchemaVersion != FileSchemaVersion {
			return File{}, fmt.Errorf("plan file: %s version %d: this narwhal reads version %d", FileSchema, head.SchemaVersion, FileSchemaVersion)
		}
		var f fileJSON
		if err := strictUnmarshal(b, &f); err != nil {
			return File{}, fmt.Errorf("plan file: %w", err)
		}
		if err := f.Plan.Validate(); err != nil {
			return File{}, fmt.Errorf("plan file: %w", err)
		}
		return File{Plan: f.Plan, ModelDir: f.ModelDir, Unmodelled: []string{}}, nil
	case launch.Schema:
		var l launchJSON
		if err := json.Unmarshal(b, &l); err != nil {
			return File{}, fmt.Errorf("plan file: %w", err)
		}
		p, unknown, err := ParseArgv(l.Engine.Argv)
		if err != nil {
			return File{}, fmt.Errorf("plan file: engine.argv: %w", err)
		}
		return File{Plan: p, Unmodelled: unknown}, nil
	}
	return File{}, fmt.Errorf("plan file: schema %q: want %s or %s (launch.json from narwhal-engine plan)", head.Schema, FileSchema, launch.Schema)
}

// Marshal writes p as a narwhal.diagnose.plan document.
func Marshal(p Plan, modelDir string) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return json.MarshalIndent(fileJSON{Schema: FileSchema, SchemaVersion: FileSchemaVersion, ModelDir: modelDir, Plan: p}, "", "  ")
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

var flagNameRE = regexp.MustCompile(`^--[a-z0-9][a-z0-9-]*$`)

// ParseArgv reads an operator's `vllm serve MODEL …` command line (its
// own launch plan, not a log). Modelled flags become typed fields;
// other flags are listed by name. Both `--flag value` and `--flag=value`
// are read; a value that does not parse is an error naming the flag.
func ParseArgv(argv []string) (Plan, []string, error) {
	var p Plan
	unknown := []string{}
	args := slices.Clone(argv)
	if len(args) >= 2 && args[0] == "vllm" && args[1] == "serve" {
		args = args[2:]
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			m, err := newModelRef(args[0], ModelFromPlanFile)
			if err != nil {
				return Plan{}, nil, err
			}
			p.Model, args = m, args[1:]
		}
	}
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(args[i], "=")
		if !strings.HasPrefix(name, "-") {
			continue // a value of an unmodelled flag
		}
		next := func() (string, error) {
			if hasVal {
				return val, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s has no value", name)
			}
			i++
			return args[i], nil
		}
		ok, err := p.setFlag(name, next)
		if err != nil {
			return Plan{}, nil, err
		}
		if !ok && flagNameRE.MatchString(name) {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	return p, slices.Compact(unknown), p.Validate()
}

// setFlag sets the field a modelled flag names; false for other flags.
func (p *Plan) setFlag(name string, next func() (string, error)) (bool, error) {
	intFlag := func(dst *int64) error {
		s, err := next()
		if err != nil {
			return err
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%s %q: want an integer", name, s)
		}
		*dst = v
		return nil
	}
	var err error
	switch name {
	case "--model":
		var s string
		if s, err = next(); err == nil {
			p.Model, err = newModelRef(s, ModelFromPlanFile)
		}
	case "--max-model-len":
		err = intFlag(&p.MaxModelLen)
	case "--max-num-seqs":
		err = intFlag(&p.MaxNumSeqs)
	case "--max-num-batched-tokens":
		err = intFlag(&p.MaxNumBatchedTokens)
	case "--port", "--tensor-parallel-size", "-tp", "--pipeline-parallel-size", "-pp":
		var v int64
		if err = intFlag(&v); err == nil {
			switch name {
			case "--port":
				p.Port = int(v)
			case "--tensor-parallel-size", "-tp":
				p.TensorParallelSize = int(v)
			default:
				p.PipelineParallelSize = int(v)
			}
		}
	case "--gpu-memory-utilization":
		var s string
		if s, err = next(); err == nil {
			if p.GPUMemoryUtilization, err = strconv.ParseFloat(s, 64); err != nil {
				err = fmt.Errorf("%s %q: want a fraction", name, s)
			}
		}
	case "--enforce-eager":
		p.EnforceEager = true
	case "--dtype", "--kv-cache-dtype", "--quantization":
		err = p.setEnumFlag(name, next)
	case "--compilation-config":
		var s string
		if s, err = next(); err == nil {
			err = p.setCompilationConfig(s)
		}
	default:
		return false, nil
	}
	return true, err
}

func (p *Plan) setEnumFlag(name string, next func() (string, error)) error {
	s, err := next()
	if err != nil {
		return err
	}
	ok := false
	switch name {
	case "--dtype":
		p.DType, ok = ParseDType(s)
	case "--kv-cache-dtype":
		p.KVCacheDType, ok = ParseKVCacheDType(s)
	default:
		p.Quantization, ok = ParseQuantization(s)
	}
	if !ok || s == "" {
		return fmt.Errorf("%s %q is not a value this plan models", name, s)
	}
	return nil
}

// setCompilationConfig reads the two capture keys of a compilation
// config; its other keys are the operator's and are not rendered.
func (p *Plan) setCompilationConfig(s string) error {
	var cc struct {
		Sizes *[]int64 `json:"cudagraph_capture_sizes"`
		Max   *int64   `json:"max_cudagraph_capture_size"`
	}
	if err := json.Unmarshal([]byte(s), &cc); err != nil {
		return fmt.Errorf("--compilation-config: %w", err)
	}
	if cc.Sizes != nil {
		p.CUDAGraphCaptureSizes = *cc.Sizes
	}
	if cc.Max != nil {
		p.MaxCUDAGraphCapture = *cc.Max
	}
	return nil
}

// FromFleet is the plan the fleet document declares for one engine: the
// model, the tensor-parallel size of its hardware block, the dtypes of
// its engine contract, and (when iid names an engine) that engine's port.
func FromFleet(cfg *fleet.Config, iid string) (Plan, error) {
	var p Plan
	m, err := newModelRef(cfg.Model, ModelFromFleetDoc)
	if err != nil {
		return Plan{}, fmt.Errorf("fleet model: %w", err)
	}
	p.Model = m
	if h := cfg.Hardware; h != nil {
		p.TensorParallelSize = h.TensorParallel
	}
	if k := cfg.EngineContract; k != nil {
		if k.ModelDtype != "" {
			d, ok := ParseDType(k.ModelDtype)
			if !ok {
				return Plan{}, fmt.Errorf("engine_contract.model_dtype %q is not a dtype this plan models", k.ModelDtype)
			}
			p.DType = d
		}
		if k.KVCacheDtype != "" {
			kv, ok := ParseKVCacheDType(k.KVCacheDtype)
			if !ok {
				return Plan{}, fmt.Errorf("engine_contract.kv_cache_dtype %q is not a kv_cache_dtype this plan models", k.KVCacheDtype)
			}
			p.KVCacheDType = kv
		}
	}
	if iid != "" {
		port, err := enginePort(cfg, iid)
		if err != nil {
			return Plan{}, err
		}
		p.Port = port
	}
	return p, p.Validate()
}

func enginePort(cfg *fleet.Config, iid string) (int, error) {
	for i, e := range cfg.Engines {
		if e.IID != iid {
			continue
		}
		u, err := url.Parse(e.URL)
		if err != nil || u.Port() == "" {
			return 0, nil // the scheme's default port: not a plan value
		}
		port, err := strconv.Atoi(u.Port())
		if err != nil || port < 1 || port > MaxPort {
			return 0, fmt.Errorf("engines[%d].url %q: invalid port", i, e.URL)
		}
		return port, nil
	}
	return 0, fmt.Errorf("engine %q is not in the fleet document", iid)
}

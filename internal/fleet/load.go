package fleet

import (
	"errors"
	"os"
	"strings"
)

// LookupFunc reads one environment variable, like os.LookupEnv.
type LookupFunc func(name string) (string, bool)

// Load reads, validates and resolves the fleet file at path, with endpoint
// references read from the process environment. Every error is a
// *LoadError naming path as the caller gave it.
func Load(path string) (*Config, error) { return LoadWith(path, os.LookupEnv) }

// LoadWith is Load with an explicit environment, for tests and callers that
// keep their own.
func LoadWith(path string, lookup LookupFunc) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &LoadError{Source: path, Stage: StageParse,
			Problems: []Problem{{Message: ioReason(err)}}, Err: err}
	}
	return Parse(path, data, lookup)
}

// ioReason is the operating system's reason without the repeated path.
func ioReason(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// LoadFromEnv loads the fleet file named by NARWHAL_FLEET, for library
// callers; the CLIs always take --fleet instead.
func LoadFromEnv() (*Config, error) {
	path := strings.TrimSpace(os.Getenv("NARWHAL_FLEET"))
	if path == "" {
		return nil, errors.New("set NARWHAL_FLEET to a fleet config file")
	}
	return Load(path)
}

// Parse runs the loading pipeline on data; source names the document in
// messages.
func Parse(source string, data []byte, lookup LookupFunc) (*Config, error) {
	doc, err := parseDocument(data)
	if err != nil {
		return nil, &LoadError{Source: source, Stage: StageParse, Problems: []Problem{{Message: err.Error()}}}
	}
	root, p := checkIdentity(doc)
	if p != nil {
		return nil, &LoadError{Source: source, Stage: StageIdentity, Problems: []Problem{*p}}
	}
	var ps problems
	top := section{m: root, ps: &ps}
	checkTopLevel(top)
	if err := ps.err(source, StageTopLevel); err != nil {
		return nil, err
	}
	cfg := Defaults()
	readFields(top, &cfg, lookup)
	if err := ps.err(source, StageFields); err != nil {
		return nil, err
	}
	if err := checkEngineIDs(source, cfg.Engines); err != nil {
		return nil, err
	}
	if err := cfg.Validate(source); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// checkIdentity is stage 2: the root is an object of this schema and version.
func checkIdentity(doc any) (map[string]any, *Problem) {
	root, ok := doc.(map[string]any)
	if !ok {
		return nil, &Problem{Message: "fleet document must be an object"}
	}
	if s, isStr := root["schema"].(string); !isStr || s != Schema {
		return nil, &Problem{Field: "schema", Message: "fleet schema is " + jsonText(root["schema"]) + ", expected '" + Schema + "'"}
	}
	v, present := root["schema_version"]
	if !present {
		return nil, &Problem{Field: "schema_version", Message: "fleet document has no schema_version"}
	}
	n, isInt := asInt(v)
	switch {
	case !isInt || n < 0:
		return nil, &Problem{Field: "schema_version", Message: "fleet schema_version must be a nonnegative integer"}
	case n < SchemaVersion:
		return nil, &Problem{Field: "schema_version", Message: versionMessage(n, "is not readable by this build")}
	case n > SchemaVersion:
		return nil, &Problem{Field: "schema_version", Message: versionMessage(n, "is newer than this build")}
	}
	return root, nil
}

func versionMessage(n int, what string) string {
	return "fleet schema version " + itoa(n) + " " + what + " (writes and reads 1)"
}

var topLevelKeys = []string{"schema", "schema_version", "model", "hardware", "engines",
	"engine_contract", "slo", "controller", "serving", "engine", "recovery", "profiles"}

// checkTopLevel is stage 3: unknown top-level keys, then missing required ones.
func checkTopLevel(top section) {
	top.unknownKeys(topLevelKeys...)
	for _, k := range []string{"model", "engines", "slo"} {
		if _, ok := top.m[k]; !ok {
			top.ps.add(k, "missing required key '%s'", k)
		}
	}
}

// readFields is stage 4, in document order.
func readFields(top section, cfg *Config, lookup LookupFunc) {
	top.str("model", &cfg.Model)
	cfg.Engines = readEngines(top, lookup)
	readSLO(top, &cfg.SLO)
	readController(top, &cfg.Controller)
	readServing(top, &cfg.Serving)
	readEngineSettings(top, &cfg.Engine)
	readRecovery(top, &cfg.Recovery)
	readProfiles(top, &cfg.Profiles)
	cfg.Hardware = readHardware(top)
	cfg.EngineContract = readContract(top)
	cfg.normalizePaths()
}

// checkEngineIDs is stage 5.
func checkEngineIDs(source string, engines []Engine) error {
	if len(engines) == 0 {
		return &LoadError{Source: source, Stage: StageEngineIDs, Problems: []Problem{{Message: "declares no engines"}}}
	}
	seen := make(map[string]bool, len(engines))
	for _, e := range engines {
		if seen[e.IID] {
			return &LoadError{Source: source, Stage: StageEngineIDs,
				Problems: []Problem{{Message: "repeats an instance id '" + e.IID + "'"}}}
		}
		seen[e.IID] = true
	}
	return nil
}

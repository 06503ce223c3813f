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
// messages. Every independent problem is reported at once: only a document
// that does not parse, or whose root is not an object, stops early.
func Parse(source string, data []byte, lookup LookupFunc) (*Config, error) {
	doc, err := parseDocument(data)
	if err != nil {
		return nil, &LoadError{Source: source, Stage: StageParse,
			Problems: []Problem{{Message: err.Error(), Stage: StageParse}}}
	}
	ps := newProblems(StageIdentity)
	root := checkIdentity(doc, ps)
	if root == nil {
		return nil, ps.err(source)
	}
	ps.stage = StageParse
	duplicateKeys(data, ps)
	top := section{m: root, ps: ps, lookup: lookup}
	cfg := Defaults()
	ps.stage = StageTopLevel
	checkTopLevel(top, cfg.fields())
	ps.stage = StageFields
	readFields(top, &cfg)
	ps.stage = StageCross
	cfg.validate(ps)
	if err := ps.err(source); err != nil {
		return nil, err
	}
	cfg.resolveControlConnections()
	return &cfg, nil
}

// checkIdentity is stage 2: the root is an object of this schema and
// version. Only a root that is not an object ends the load (nil): a wrong
// schema or version is reported beside the rest of the document's problems.
func checkIdentity(doc any, ps *problems) map[string]any {
	root, ok := doc.(map[string]any)
	if !ok {
		ps.add("", "fleet document must be an object")
		return nil
	}
	if s, isStr := root["schema"].(string); !isStr || s != Schema {
		ps.add("schema", "fleet schema is %s, expected '%s'", jsonText(root["schema"]), Schema)
	}
	v, present := root["schema_version"]
	if !present {
		ps.add("schema_version", "fleet document has no schema_version")
		return root
	}
	n, isInt := asInt(v)
	switch {
	case !isInt || n < 0:
		ps.add("schema_version", "fleet schema_version must be a nonnegative integer")
	case n < SchemaVersion:
		ps.add("schema_version", "%s", versionMessage(n, "is not readable by this build"))
	case n > SchemaVersion:
		ps.add("schema_version", "%s", versionMessage(n, "is newer than this build"))
	}
	return root
}

// versionMessage is the reference's text behind the field path.
func versionMessage(n int, what string) string {
	return "schema_version: fleet schema version " + itoa(n) + " " + what + " (writes and reads 1)"
}

// checkTopLevel is stage 3: unknown top-level keys, then missing required ones.
func checkTopLevel(top section, fs []field) {
	top.unknownKeys(append(names(fs), identityKeys...)...)
	for _, f := range fs {
		if _, ok := top.m[f.name]; f.required && !ok {
			top.ps.add(f.name, "missing required key '%s'", f.name)
		}
	}
}

// readFields is stage 4, in document order; the engine identity problems
// of stage 5 are found on the way.
func readFields(top section, cfg *Config) {
	top.readFields(cfg.fields())
	cfg.normalizePaths()
}

package fleet

import (
	"math"
	"regexp"
	"sort"
	"strings"
)

// Registered router-side adapters. Registering another only changes the
// "known ones are" lists.
var (
	knownConnectors = []string{"nixl"}
	knownDialects   = []string{"vllm"}
)

var imageDigestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Validate checks a Config built in code with every rule the loader
// applies to values (engine URLs and iids, the serving policy, the
// cross-field rules) and reports every failing rule together; source names
// the configuration in the error. Its one side effect: a valid config's
// engine.control_connections 0 becomes max(4, 2 × engines).
func (c *Config) Validate(source string) error {
	ps := newProblems(StageFields)
	c.checkEngines(ps)
	c.Serving.checkPolicy(ps)
	ps.stage = StageCross
	c.validate(ps)
	if err := ps.err(source); err != nil {
		return err
	}
	c.resolveControlConnections()
	return nil
}

// checkEngines is what the loader checks on each engine entry while
// reading it: endpoints, unique iids, at least one engine.
func (c *Config) checkEngines(ps *problems) {
	if len(c.Engines) == 0 {
		noEngines(ps)
	}
	seen := iidSeen{}
	for i := range c.Engines {
		e := &c.Engines[i]
		p := "engines[" + itoa(i) + "]"
		for _, f := range engineFields(e) {
			if f.kind == kBaseURL || f.kind == kURL {
				checkEndpoint(ps, p+"."+f.name, f.kind == kBaseURL, *f.str)
			}
		}
		seen.check(ps, i, e.IID)
	}
}

// validate runs the range and cross-field rules (stage 6) in table order.
// A rule that reads a field the reader could not read is skipped: its
// placeholder is not the operator's value.
func (c *Config) validate(ps *problems) {
	checkFields(ps, "", c.fields())
}

// checkFields checks each field's own rules, then the explicit rules hung
// on it; a section's fields come before its own explicit rules. The
// serving-policy fields are checked with the policy (checkPolicy).
func checkFields(ps *problems, path string, fs []field) {
	for _, f := range fs {
		p := join(path, f.name)
		switch {
		case f.kind == kSection:
			if sub := f.sub(); sub != nil {
				checkFields(ps, p, sub)
			}
		case !f.policy && ps.ok(p):
			checkOwn(ps, p, f)
		}
		if f.then != nil {
			f.then(ps)
		}
	}
}

// checkOwn checks the field at path against its bounds and one-field rules.
func checkOwn(ps *problems, path string, f field) {
	for _, b := range f.bounds {
		if b.fails(f.value()) {
			ps.add(path, "%s", b.message(path, f))
		}
	}
	if f.nonEmpty && *f.str == "" {
		ps.add(path, "%s is required", path)
	}
	for _, r := range f.rules {
		r(ps, path, f)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (c *Config) resolveControlConnections() {
	if c.Engine.ControlConnections == 0 {
		c.Engine.ControlConnections = max(4, 2*len(c.Engines))
	}
}

// One-field rules no bound expresses.

// oneOf accepts exactly the choices (two of them).
func oneOf(a, b string) rule {
	return func(ps *problems, path string, f field) {
		if v := *f.str; v != a && v != b {
			ps.add(path, "%s must be '%s' or '%s', got '%s'", path, a, b, v)
		}
	}
}

// emptyOr is oneOf where "" (not declared) is also accepted.
func emptyOr(a, b string) rule {
	return func(ps *problems, path string, f field) {
		if *f.str != "" {
			oneOf(a, b)(ps, path, f)
		}
	}
}

func wholeSeconds(ps *problems, path string, f field) {
	if *f.num != math.Trunc(*f.num) {
		ps.add(path, "%s must be whole seconds", path)
	}
}

// registered accepts a registered adapter name; what names the adapter kind.
func registered(what string, known []string) rule {
	return func(ps *problems, path string, f field) {
		v := *f.str
		for _, k := range known {
			if v == k {
				return
			}
		}
		sorted := append([]string(nil), known...)
		sort.Strings(sorted)
		ps.add(path, "%s: unknown %s '%s': known ones are %s", path, what, v, strings.Join(sorted, ", "))
	}
}

// calibrationUnsupported refuses a path rather than accept and ignore it:
// nothing in this build writes or verifies the artifact (docs/fleet.md).
func calibrationUnsupported(ps *problems, path string, f field) {
	if *f.str != "" {
		ps.add(path, "%s: first-token calibration artifacts are not supported by this build (it cannot verify them); remove the field or set it to \"\"", path)
	}
}

func immutableDigest(ps *problems, path string, f field) {
	if v := *f.str; v != "" && !imageDigestRE.MatchString(v) {
		ps.add(path, "%s must be an immutable sha256:<64 hex> digest", path)
	}
}

func staysTrue(ps *problems, path string, f field) {
	if !*f.flag {
		ps.add(path, "%s must stay true; disabling vLLM's NIXL compatibility hash permits silent corruption", path)
	}
}

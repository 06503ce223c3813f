package fleet

import (
	"sort"
	"strings"
)

// section reads one JSON object of the document into the fields of its
// table, reporting kind problems with public paths. A field that is absent
// keeps the value already in its destination (the default).
type section struct {
	path   string // "" for the top level
	m      map[string]any
	ps     *problems
	lookup LookupFunc // resolves endpoint references
}

func (s section) field(key string) string { return join(s.path, key) }

// inner is the section of the object m at key.
func (s section) inner(key string, m map[string]any) section {
	return section{path: s.field(key), m: m, ps: s.ps, lookup: s.lookup}
}

// unknownKeys reports keys outside known, sorted; "_" keys are annotations.
func (s section) unknownKeys(known ...string) {
	ok := make(map[string]bool, len(known))
	for _, k := range known {
		ok[k] = true
	}
	var bad []string
	for k := range s.m {
		if !ok[k] && !strings.HasPrefix(k, "_") {
			bad = append(bad, k)
		}
	}
	sort.Strings(bad)
	for _, k := range bad {
		if s.path == "" {
			s.ps.add(k, "unknown key '%s' (a typo falls back to the default silently)", k)
		} else {
			s.ps.add(s.field(k), "unknown %s key '%s' (a typo falls back to the default silently)", s.path, k)
		}
	}
}

// wrongKind reports that key's value is not what its kind needs.
func (s section) wrongKind(key, what string) {
	s.ps.add(s.field(key), "%s must be %s", s.field(key), what)
}

// readSection checks a nested section's keys and reads its fields.
func (s section) readSection(fs []field) {
	s.unknownKeys(names(fs)...)
	s.readFields(fs)
}

// readFields reads fs in table order. A required field that is absent
// reads as null (a kind problem), except at the top level, whose missing
// keys stage 3 has reported.
func (s section) readFields(fs []field) {
	for _, f := range fs {
		v, present := s.m[f.name]
		if !present && !(f.required && s.path != "") {
			continue
		}
		s.read(f, v)
	}
}

// read stores v in f, or reports why it cannot.
func (s section) read(f field, v any) {
	switch f.kind {
	case kString:
		if t, ok := v.(string); ok {
			*f.str = t
			return
		}
		s.wrongKind(f.name, "a string")
	case kBool:
		if t, ok := v.(bool); ok {
			*f.flag = t
			return
		}
		s.wrongKind(f.name, "a boolean")
	case kOptBool:
		s.readOptBool(f, v)
	case kInt:
		s.readInt(f, v)
	case kNumber:
		s.readNumber(f, v)
	case kRole:
		readRole(s, f.name, v, f.role)
	case kBaseURL, kURL:
		*f.str = readEndpoint(s, f.name, f.kind == kBaseURL, v)
	case kSection:
		s.readObject(f, v)
	case kEngines:
		*f.engines = readEngines(s, f.name, v)
	case kStrings:
		s.readStrings(f, v)
	}
}

// readStrings reads a list of strings; null is the empty list.
func (s section) readStrings(f field, v any) {
	if v == nil {
		*f.strs = nil
		return
	}
	list, ok := v.([]any)
	if !ok {
		s.wrongKind(f.name, "a list of strings")
		return
	}
	var out []string
	for _, e := range list {
		t, ok := e.(string)
		if !ok {
			s.wrongKind(f.name, "a list of strings")
			return
		}
		out = append(out, t)
	}
	*f.strs = out
}

func (s section) readOptBool(f field, v any) {
	if v == nil {
		*f.opt = nil
		return
	}
	if t, ok := v.(bool); ok {
		*f.opt = &t
		return
	}
	s.wrongKind(f.name, "a boolean or null")
}

// readInt reads an integer literal. A serving-policy field of the wrong
// kind is not reported here: it takes a value its own check refuses.
func (s section) readInt(f field, v any) {
	if i, ok := asInt(v); ok {
		*f.int = i
		return
	}
	if f.policy {
		f.placeholder()
		return
	}
	s.wrongKind(f.name, "an integer")
}

func (s section) readNumber(f field, v any) {
	n, isNum, finite := asNumber(v)
	switch {
	case finite:
		*f.num = n
	case f.policy:
		f.placeholder()
	case isNum:
		s.wrongKind(f.name, "finite")
	default:
		s.wrongKind(f.name, "a number")
	}
}

// readObject reads a nested section. A null optional section is absent;
// a null required one is a kind problem.
func (s section) readObject(f field, v any) {
	if v == nil && !f.required {
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		s.wrongKind(f.name, "an object")
		return
	}
	if f.open != nil {
		f.open()
	}
	s.inner(f.name, m).readSection(f.sub())
	if f.whenRead != nil {
		f.whenRead(s.ps)
	}
}

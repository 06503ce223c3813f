package fleet

import (
	"math"
	"sort"
	"strings"
)

// section reads one JSON object of the document into typed fields,
// reporting kind problems with public paths. A field that is absent keeps
// the value already in its destination (the default).
type section struct {
	path string // "" for the top level
	m    map[string]any
	ps   *problems
}

func (s section) field(key string) string {
	if s.path == "" {
		return key
	}
	return s.path + "." + key
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

func (s section) str(key string, dst *string) {
	v, ok := s.m[key]
	if !ok {
		return
	}
	if t, isStr := v.(string); isStr {
		*dst = t
		return
	}
	s.ps.add(s.field(key), "%s must be a string", s.field(key))
}

func (s section) boolean(key string, dst *bool) {
	v, ok := s.m[key]
	if !ok {
		return
	}
	if t, isBool := v.(bool); isBool {
		*dst = t
		return
	}
	s.ps.add(s.field(key), "%s must be a boolean", s.field(key))
}

// optBool reads a bool-or-null field.
func (s section) optBool(key string, dst **bool) {
	v, ok := s.m[key]
	if !ok || v == nil {
		*dst = nil
		return
	}
	if t, isBool := v.(bool); isBool {
		*dst = &t
		return
	}
	s.ps.add(s.field(key), "%s must be a boolean or null", s.field(key))
}

func (s section) integer(key string, dst *int) {
	v, ok := s.m[key]
	if !ok {
		return
	}
	if i, isInt := asInt(v); isInt {
		*dst = i
		return
	}
	s.ps.add(s.field(key), "%s must be an integer", s.field(key))
}

func (s section) number(key string, dst *float64) {
	v, ok := s.m[key]
	if !ok {
		return
	}
	f, isNum, finite := asNumber(v)
	switch {
	case finite:
		*dst = f
	case isNum:
		s.ps.add(s.field(key), "%s must be finite", s.field(key))
	default:
		s.ps.add(s.field(key), "%s must be a number", s.field(key))
	}
}

// required makes a missing key a kind error, as for slo and hardware
// fields: the message is the one a wrong kind would give.
func (s section) required(key string, read func(string)) {
	if _, ok := s.m[key]; !ok {
		s.m[key] = nil
	}
	read(key)
}

// object returns the sub-object at key. A null or absent optional section
// is reported absent (ok false, no problem); a required one is a kind error.
func (s section) object(key string, required bool) (section, bool) {
	v, present := s.m[key]
	if !present || (v == nil && !required) {
		return section{}, false
	}
	m, isObj := v.(map[string]any)
	if !isObj {
		s.ps.add(s.field(key), "%s must be an object", s.field(key))
		return section{}, false
	}
	return section{path: s.field(key), m: m, ps: s.ps}, true
}

// Serving-policy fields have their own messages: a wrong kind is reported
// by the policy check, so the reader only marks it with a value that fails
// that check.

func (s section) policyInt(key string, dst *int, bad int) {
	v, ok := s.m[key]
	if !ok {
		return
	}
	if i, isInt := asInt(v); isInt {
		*dst = i
		return
	}
	*dst = bad
}

func (s section) policyNumber(key string, dst *float64) {
	v, ok := s.m[key]
	if !ok {
		return
	}
	if f, _, finite := asNumber(v); finite {
		*dst = f
		return
	}
	*dst = math.NaN()
}

package fleet

import (
	"math"
	"strconv"
	"strings"
)

// The fleet document is declared once, as tables of fields (table.go).
// Each field carries its JSON name, its kind, a pointer to where its value
// lives, its default and its own range; the reader (reader.go), the
// unknown-key check, Defaults and the range checks of validation
// (validate.go) all walk the same tables, so a field's name, default and
// limits are written in one place. Rules between fields stay explicit
// code, hung on the field they follow in the problem report.

// kind is how a field's JSON value is read and what its pointer is.
type kind uint8

const (
	kString  kind = iota // str
	kBool                // flag
	kOptBool             // opt: a boolean or null
	kInt                 // int: an integer literal
	kNumber              // num: any finite number
	kRole                // role: engines[].role, 'prefill' or 'decode'
	kBaseURL             // str: engines[].url, a base request paths are appended to
	kURL                 // str: engines[].attestation_url, empty means no sidecar
	kSection             // sub: a nested object
	kEngines             // engines: the engine list, read by readEngines
	kStrings             // strs: a list of strings; null or absent is empty
)

// field is one key of one section of the fleet document.
type field struct {
	name string
	kind kind

	// Where the value lives: the one pointer kind names.
	str     *string
	flag    *bool
	opt     **bool
	int     *int
	num     *float64
	role    *Role
	engines *[]Engine
	strs    *[]string
	// sub lists a section's fields; nil when an optional section is
	// absent. open creates an optional section at its defaults.
	sub  func() []field
	open func()

	defStr  string  // the default of a string or role
	defBool bool    // the default of a boolean
	defNum  float64 // the default of an integer or number

	required bool    // absent or null is an error (how the section says)
	nonEmpty bool    // "" is refused: "<path> is required"
	policy   bool    // a serving-policy field (checkPolicy): a wrong kind reads as a value its bound refuses
	bounds   []bound // the value's own range, in report order
	rules    []rule  // other one-field rules, after the bounds

	// then runs the explicit rules that come after this field in the
	// report, usually relations to other fields (stage 6).
	then func(ps *problems)
	// whenRead runs the explicit rules of a section once it is read
	// (stage 4): the serving policy.
	whenRead func(ps *problems)
}

// rule is a one-field check no bound expresses; path is the field's.
type rule func(ps *problems, path string, f field)

// Constructors, one per kind, taking the name, the destination, the
// default and the bounds.

func text(name string, dst *string, def string) field {
	return field{name: name, kind: kString, str: dst, defStr: def}
}

// texts is a list of strings whose default is empty.
func texts(name string, dst *[]string) field {
	return field{name: name, kind: kStrings, strs: dst}
}

func flag(name string, dst *bool, def bool) field {
	return field{name: name, kind: kBool, flag: dst, defBool: def}
}

// optFlag is a boolean whose default, null, means "not declared".
func optFlag(name string, dst **bool) field {
	return field{name: name, kind: kOptBool, opt: dst}
}

func integer(name string, dst *int, def int, bounds ...bound) field {
	return field{name: name, kind: kInt, int: dst, defNum: float64(def), bounds: bounds}
}

func number(name string, dst *float64, def float64, bounds ...bound) field {
	return field{name: name, kind: kNumber, num: dst, defNum: def, bounds: bounds}
}

// object is a section that is always there, at its defaults when absent.
func object(name string, fields func() []field) field {
	return field{name: name, kind: kSection, sub: fields}
}

// optional is a section that is nil unless the document has it; a present
// one starts from the defaults of its fields.
func optional[T any](name string, dst **T, fields func(*T) []field) field {
	return field{name: name, kind: kSection,
		sub: func() []field {
			if *dst == nil {
				return nil
			}
			return fields(*dst)
		},
		open: func() {
			v := new(T)
			applyDefaults(fields(v))
			*dst = v
		}}
}

// Modifiers.

func (f field) req() field        { f.required = true; return f }
func (f field) mustSet() field    { f.nonEmpty = true; return f }
func (f field) asPolicy() field   { f.policy = true; return f }
func (f field) with(r rule) field { f.rules = append(f.rules, r); return f }

func (f field) andThen(rules func(ps *problems)) field { f.then = rules; return f }

func (f field) onRead(rules func(ps *problems)) field { f.whenRead = rules; return f }

// names lists the fields' keys, for the unknown-key check.
func names(fs []field) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.name
	}
	return out
}

// applyDefaults sets every field to its default; optional sections and
// the engine list stay empty.
func applyDefaults(fs []field) {
	for _, f := range fs {
		switch f.kind {
		case kString, kBaseURL, kURL:
			*f.str = f.defStr
		case kRole:
			*f.role = Role(f.defStr)
		case kBool:
			*f.flag = f.defBool
		case kOptBool:
			*f.opt = nil
		case kInt:
			*f.int = int(f.defNum)
		case kNumber:
			*f.num = f.defNum
		case kStrings:
			*f.strs = nil
		case kSection:
			if f.open == nil {
				applyDefaults(f.sub())
			}
		}
	}
}

// value is an integer or number field's value, for its bounds.
func (f field) value() float64 {
	if f.kind == kInt {
		return float64(*f.int)
	}
	return *f.num
}

// shown is an integer or number field's value as a message prints it.
func (f field) shown() string {
	if f.kind == kStrings {
		return "[" + strings.Join(*f.strs, ",") + "]"
	}
	if f.kind == kInt {
		return strconv.Itoa(*f.int)
	}
	return num(*f.num)
}

// placeholder is what a serving-policy field holds when its value has the
// wrong kind: a value its first bound refuses, so that the policy's own
// message reports it.
func (f field) placeholder() {
	if f.kind == kInt {
		*f.int = int(f.bounds[0].lo) - 1
		return
	}
	*f.num = math.NaN()
}

// edge is one side of a bound.
type edge uint8

const (
	unbounded edge = iota
	inclusive
	exclusive
)

// bound is one range rule on an integer or number. A value outside it is
// reported as "<path> <says>", with ", got <value>" when got is set. NaN
// fails every lower limit and passes every upper one, as the comparisons
// of the reference do.
type bound struct {
	lo, hi         float64
	loEdge, hiEdge edge
	offAtZero      bool // 0 means "off" and passes
	says           string
	got            bool
}

// The recurring bounds.
var (
	positive    = bound{loEdge: exclusive, says: "must be positive", got: true}
	nonnegative = bound{loEdge: inclusive, says: "must be nonnegative", got: true}
	atLeastOne  = bound{lo: 1, loEdge: inclusive, says: "must be at least 1", got: true}
	// The same limits where the message keeps no value.
	oneOrMore   = bound{lo: 1, loEdge: inclusive, says: "must be at least 1"}
	notNegative = bound{loEdge: inclusive, says: "must be nonnegative"}
)

// fails reports whether v is outside b.
func (b bound) fails(v float64) bool {
	if b.offAtZero && v == 0 {
		return false
	}
	switch b.loEdge {
	case inclusive:
		if !(v >= b.lo) {
			return true
		}
	case exclusive:
		if !(v > b.lo) {
			return true
		}
	}
	switch b.hiEdge {
	case inclusive:
		return v > b.hi
	case exclusive:
		return v >= b.hi
	}
	return false
}

func (b bound) message(path string, f field) string {
	if b.got {
		return path + " " + b.says + ", got " + f.shown()
	}
	return path + " " + b.says
}

package fleet

import (
	"math"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// destination is the pointer a scalar field writes through.
func destination(f field) any {
	switch f.kind {
	case kString, kBaseURL, kURL:
		return f.str
	case kBool:
		return f.flag
	case kOptBool:
		return f.opt
	case kInt:
		return f.int
	case kNumber:
		return f.num
	case kRole:
		return f.role
	case kEngines:
		return f.engines
	case kStrings:
		return f.strs
	}
	return nil
}

// checkAgainstStruct asserts that fs declares exactly the json-tagged
// fields of the struct sv, each name writing into the struct field with
// that tag, and recurses into sections.
func checkAgainstStruct(t *testing.T, path string, sv reflect.Value, fs []field) {
	t.Helper()
	tagged := map[string]reflect.Value{}
	for i := 0; i < sv.NumField(); i++ {
		name, _, _ := strings.Cut(sv.Type().Field(i).Tag.Get("json"), ",")
		tagged[name] = sv.Field(i)
	}
	for _, f := range fs {
		p := join(path, f.name)
		fv, ok := tagged[f.name]
		if !ok {
			t.Errorf("%s: declared in the table, but no field of %s has the json tag %q", p, sv.Type(), f.name)
			continue
		}
		delete(tagged, f.name)
		if f.kind == kSection {
			if fv.Kind() == reflect.Pointer {
				fv = fv.Elem()
			}
			checkAgainstStruct(t, p, fv, f.sub())
			continue
		}
		if got := reflect.ValueOf(destination(f)).Pointer(); got != fv.Addr().Pointer() {
			t.Errorf("%s: the table writes somewhere else than the struct field tagged %q", p, f.name)
		}
	}
	for name := range tagged {
		t.Errorf("%s: %s has a field tagged %q that the table does not declare", path, sv.Type(), name)
	}
}

// The tables and the struct tags (which Save writes) name the same fields,
// and each name reads into the field of its tag.
func TestTableMatchesStructTags(t *testing.T) {
	c := Config{Hardware: &Hardware{}, EngineContract: &EngineContract{}}
	checkAgainstStruct(t, "", reflect.ValueOf(&c).Elem(), c.fields())
	var e Engine
	checkAgainstStruct(t, "engines[]", reflect.ValueOf(&e).Elem(), engineFields(&e))
}

func TestBoundFails(t *testing.T) {
	policy := policyDelay
	cases := []struct {
		name string
		b    bound
		v    float64
		want bool
	}{
		{"positive refuses 0", positive, 0, true},
		{"positive takes a small value", positive, 1e-9, false},
		{"positive refuses NaN", positive, math.NaN(), true},
		{"nonnegative takes 0", nonnegative, 0, false},
		{"nonnegative refuses -0.5", nonnegative, -0.5, true},
		{"at least one refuses 0.5", atLeastOne, 0.5, true},
		{"at least one takes 1", atLeastOne, 1, false},
		{"attempts take 3", policyAttempts, 3, false},
		{"attempts refuse 4", policyAttempts, 4, true},
		{"delays refuse +Inf", policy, math.Inf(1), true},
		{"delays refuse -Inf", policy, math.Inf(-1), true},
		{"delays take 0", policy, 0, false},
		{"an upper limit lets NaN pass", bound{hi: 1, hiEdge: inclusive}, math.NaN(), false},
		{"an inclusive upper limit takes 1", bound{hi: 1, hiEdge: inclusive}, 1, false},
		{"an exclusive upper limit refuses 1", bound{hi: 1, hiEdge: exclusive}, 1, true},
		{"off at zero takes 0", bound{lo: 1, loEdge: inclusive, offAtZero: true}, 0, false},
		{"off at zero still refuses 0.5", bound{lo: 1, loEdge: inclusive, offAtZero: true}, 0.5, true},
	}
	for _, tc := range cases {
		if got := tc.b.fails(tc.v); got != tc.want {
			t.Errorf("%s: fails(%v) = %v, want %v", tc.name, tc.v, got, tc.want)
		}
	}
}

// A serving-policy field of the wrong kind reads as a value its own bound
// refuses, so the policy reports it.
func TestPolicyPlaceholderFailsItsBound(t *testing.T) {
	var s Serving
	for _, f := range s.fields() {
		if !f.policy {
			continue
		}
		f.placeholder()
		if !f.bounds[0].fails(f.value()) {
			t.Errorf("serving.%s: placeholder %s passes its bound", f.name, f.shown())
		}
	}
}

var (
	docRowRE   = regexp.MustCompile("^\\| `([a-z_.]+)`(?: policy)? \\| (.*) \\|$")
	docEntryRE = regexp.MustCompile("`([a-z_]+)` (`\"[^\"]*\"`|[^\\s,]+)")
)

// The defaults table of docs/fleet.md lists every defaulted field with the
// default the table declares.
func TestDefaultsAsDocumented(t *testing.T) {
	data, err := os.ReadFile("../../docs/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		m := docRowRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, e := range docEntryRE.FindAllStringSubmatch(m[2], -1) {
			documented[m[1]+"."+e[1]] = strings.Trim(e[2], "`\"")
		}
	}
	c := Defaults()
	for _, sec := range []string{"controller", "serving", "engine", "recovery", "profiles"} {
		for _, f := range c.fields() {
			if f.name == sec {
				checkDocumented(t, sec, f.sub(), documented)
			}
		}
	}
}

func checkDocumented(t *testing.T, path string, fs []field, documented map[string]string) {
	t.Helper()
	for _, f := range fs {
		p := join(path, f.name)
		var want string
		switch f.kind {
		case kSection:
			checkDocumented(t, p, f.sub(), documented)
			continue
		case kString:
			want = *f.str
		case kBool:
			want = map[bool]string{true: "true", false: "false"}[*f.flag]
		default:
			want = f.shown()
		}
		got, ok := documented[p]
		switch {
		case !ok:
			t.Errorf("%s (default %q) is not in the defaults table of docs/fleet.md", p, want)
		case got != want:
			t.Errorf("%s: docs/fleet.md says the default is %q, the table declares %q", p, got, want)
		}
	}
}

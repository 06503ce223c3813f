package diagnose

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/narwhal-go/narwhal/internal/vllmlog"
)

// capKind says how a regexp group becomes a typed candidate.
type capKind uint8

const (
	ckGiB        capKind = iota // a decimal in GiB
	ckMem                       // a decimal and, in the next group, its unit
	ckCount                     // tokens or blocks, thousands separators allowed
	ckInt                       // a plain (possibly negative) integer
	ckIntish                    // an integer that may be printed as a float ("32768.0")
	ckRatio                     // a decimal ratio
	ckCCInt                     // a capability as vLLM's int: 75 → 7.5
	ckCCDot                     // a capability as "7.5"
	ckText                      // enum or identifier text, validated by sanitize
	ckArchList                  // "['A', 'B']" → the first name
	ckArchListed                // the first name of group, and whether group+1 lists it (i = 1) or not (0)
	ckVersion                   // a vLLM version
	ckConst                     // no group: sets the capture's constant text
	ckConstInt                  // no group: sets the capture's constant integer
	ckLogMem                    // a vllmlog memory figure: number in group, unit in unit
	ckLogMemGB                  // ckLogMem whose source prints "GB" for a value divided by 2^30
)

type capture struct {
	group int
	unit  int // ckLogMem: the unit's group
	field fieldID
	kind  capKind
	text  string // ckConst
	i     int64  // ckConstInt
}

// rx is one pattern of a matcher and the captures it yields.
type rx struct {
	re       *regexp.Regexp
	caps     []capture
	optional bool // the matcher fires without it; it only adds facts
}

// extractError is why a capture could not become a candidate.
type extractError struct {
	field  fieldID
	reason RejectReason
}

// extract applies one pattern to msg, writing candidates into out. It
// reports whether the pattern matched.
func (p *rx) extract(msg string, n int, out *vals, rej *[]Rejection) bool {
	m := p.re.FindStringSubmatch(msg)
	if m == nil {
		return false
	}
	for _, c := range p.caps {
		v, err := c.value(m)
		if err != nil {
			if err.reason != "" {
				*rej = append(*rej, Rejection{Field: fieldNames[c.field], Reason: err.reason, Line: n})
			}
			continue
		}
		v.set, v.line = true, n
		out[c.field] = v
	}
	return true
}

func (c capture) value(m []string) (val, *extractError) {
	switch c.kind {
	case ckConst:
		return val{text: c.text}, nil
	case ckConstInt:
		return val{i: c.i}, nil
	case ckGiB, ckMem, ckLogMem, ckLogMemGB:
		return c.memValue(m)
	case ckText:
		return textValue(c.field, m[c.group])
	case ckArchList:
		return textValue(c.field, firstArch(m[c.group]))
	case ckArchListed:
		first := firstArch(m[c.group])
		if first == "" {
			return val{}, &extractError{field: c.field, reason: RejectMalformed}
		}
		listed := strings.Contains(m[c.group+1], "'"+first+"'") || strings.Contains(m[c.group+1], `"`+first+`"`)
		return val{i: boolInt(listed)}, nil
	}
	v, ok := scalarValue(c.kind, m[c.group])
	if !ok {
		return val{}, &extractError{field: c.field, reason: RejectMalformed}
	}
	return v, nil
}

// memValue reads a byte amount: GiB by default, or the unit printed in the
// group after the number (ckMem). A number too large is out of range, not
// malformed.
func (c capture) memValue(m []string) (val, *extractError) {
	u, ok := int64(1<<30), true
	switch c.kind {
	case ckMem:
		u, ok = unitBytes(m[c.group+1])
	case ckLogMem, ckLogMemGB:
		u, ok = vllmlog.UnitBytes(m[c.unit], c.kind == ckLogMemGB)
	}
	if !ok {
		return val{}, &extractError{field: c.field, reason: RejectMalformed}
	}
	b, err := vllmlog.DecimalBytes(m[c.group], u)
	if err != nil {
		return val{}, &extractError{field: c.field, reason: RejectOutOfRange}
	}
	return val{i: b}, nil
}

// scalarValue reads the numeric and version kinds; false means malformed.
func scalarValue(k capKind, s string) (val, bool) {
	switch k {
	case ckCount:
		n, err := vllmlog.ParseCount(s)
		return val{i: n}, err == nil
	case ckInt, ckIntish:
		if k == ckIntish {
			s = strings.TrimSuffix(s, ".0")
		}
		n, err := strconv.ParseInt(s, 10, 64)
		return val{i: n}, err == nil
	case ckRatio:
		f, err := strconv.ParseFloat(s, 64)
		return val{f: f}, err == nil && len(s) <= 12
	case ckCCInt:
		n, err := strconv.Atoi(s)
		ok := err == nil && n >= 0 && n <= 1000
		return val{cc: ComputeCapability{Major: n / 10, Minor: n % 10}}, ok
	case ckCCDot:
		maj, min, ok := strings.Cut(s, ".")
		a, err1 := strconv.Atoi(maj)
		b, err2 := strconv.Atoi(min)
		return val{cc: ComputeCapability{Major: a, Minor: b}}, ok && err1 == nil && err2 == nil
	case ckVersion:
		v, ok := ParseEngineVersion(s)
		return val{ver: v}, ok
	}
	return val{}, false
}

// unitBytes extends vllmlog's unit table with the bare byte units torch
// prints ("0 bytes free", "448.00 KiB").
func unitBytes(unit string) (int64, bool) {
	switch unit {
	case "B", "bytes", "byte":
		return 1, true
	}
	return vllmlog.UnitBytes(unit, false)
}

// textValue checks enum and identifier text as soon as it is read, so a
// refused value is reported even when a later line states the field again.
// "None" and "auto" mean the setting is absent: no candidate, no rejection.
func textValue(f fieldID, s string) (val, *extractError) {
	refuse := func(r RejectReason) (val, *extractError) { return val{}, &extractError{field: f, reason: r} }
	if slices.Contains(absentText[f], s) {
		return refuse("")
	}
	switch f {
	case fDType:
		if _, ok := ParseDType(s); !ok {
			return refuse(RejectNotInEnum)
		}
	case fQuant:
		if _, ok := ParseQuantMethod(s); !ok {
			return refuse(RejectNotInEnum)
		}
	case fArch:
		if _, ok := ParseArchitecture(s); !ok {
			return refuse(RejectBadIdentifier)
		}
	case fGPU:
		if _, ok := LookupGPUKey(s); !ok {
			return refuse(RejectUnknownGPU)
		}
	}
	return val{text: s}, nil
}

// firstArch reads the first name of a Python list body "'A', 'B'".
func firstArch(list string) string {
	first, _, _ := strings.Cut(list, ",")
	return strings.Trim(strings.TrimSpace(first), `'"`)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

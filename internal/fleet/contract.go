package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Missing lists the contract fields that are not declared, sorted. A field
// is undeclared when it is null, "" or, for a count, 0; a plain boolean
// always declares a value. vllm_version and connector are not listed:
// validation already requires them (mustSet), as it requires
// enforce_handshake_compat to be true. Lifecycle drain and readmission
// need an empty list.
func (k *EngineContract) Missing() []string {
	var out []string
	for _, f := range contractFields(k) {
		undeclared := false
		switch f.kind {
		case kString:
			undeclared = !f.nonEmpty && *f.str == ""
		case kInt:
			undeclared = *f.int == 0
		case kOptBool:
			undeclared = *f.opt == nil
		}
		if undeclared {
			out = append(out, f.name)
		}
	}
	sort.Strings(out)
	return out
}

// Complete reports whether every contract field is declared.
func (k *EngineContract) Complete() bool { return len(k.Missing()) == 0 }

// Fingerprint is the first 16 hex characters of SHA-256 over the contract's
// canonical text. Profiles and calibration artifacts bind to it, so the
// text matches the reference byte for byte: keys sorted, compact
// separators, strings escaped as Python's json.dumps does by default.
func (k *EngineContract) Fingerprint() string {
	sum := sha256.Sum256([]byte(k.canonicalText()))
	return hex.EncodeToString(sum[:])[:16]
}

// canonicalText is the contract as sorted, compact JSON with Python's
// string escapes.
func (k *EngineContract) canonicalText() string {
	fs := contractFields(k)
	sort.Slice(fs, func(i, j int) bool { return fs[i].name < fs[j].name })
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range fs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(pyString(f.name))
		b.WriteByte(':')
		b.WriteString(canonicalValue(f))
	}
	b.WriteByte('}')
	return b.String()
}

// canonicalValue is one contract value as the reference's json.dumps
// writes it.
func canonicalValue(f field) string {
	switch f.kind {
	case kInt:
		return strconv.Itoa(*f.int)
	case kOptBool:
		return pyOptBool(*f.opt)
	case kBool:
		return strconv.FormatBool(*f.flag)
	}
	return pyString(*f.str)
}

func pyOptBool(b *bool) string {
	if b == nil {
		return "null"
	}
	return strconv.FormatBool(*b)
}

// pyString quotes s as Python's json.dumps(ensure_ascii=True) does: short
// escapes for " \ \b \f \n \r \t, \uXXXX for everything else outside
// printable ASCII (surrogate pairs above U+FFFF), and nothing else escaped.
func pyString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			switch {
			case r >= 0x20 && r <= 0x7e:
				b.WriteRune(r)
			case r > 0xffff:
				hi, lo := utf16.EncodeRune(r)
				fmt.Fprintf(&b, `\u%04x\u%04x`, hi, lo)
			default:
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

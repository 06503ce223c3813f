package canon

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/gowebpki/jcs"
	"pgregory.net/rapid"
)

// jv is a generated JSON value; objects keep their keys in JCS order.
type jv struct {
	kind  byte // 'n' null, 'b' bool, 'd' number, 's' string, 'a' array, 'o' object
	b     bool
	d     float64
	s     string
	items []jv
	keys  []string
}

var strAlphabet = []rune{'a', 'Z', '0', '/', '"', '\\', '\n', '\x1f', '\x7f', 'é', '€', '\u2028', '😂', '\uFB33', ' '}

func genString(t *rapid.T, label string) string {
	rs := rapid.SliceOfN(rapid.SampledFrom(strAlphabet), 0, 6).Draw(t, label)
	return string(rs)
}

func genNumber(t *rapid.T) float64 {
	f := rapid.OneOf(
		rapid.Map(rapid.IntRange(-1000, 1000), func(i int) float64 { return float64(i) }),
		rapid.Float64(),
		rapid.SampledFrom([]float64{0, math.Copysign(0, -1), 1e21, 5e-324, 1e-7, 0.1, 4.5, 1 << 53}),
	).Draw(t, "num")
	if a := math.Abs(f); math.IsNaN(f) || math.IsInf(f, 0) || (a > 1<<53 && a < 1e21) {
		return 7
	}
	return f
}

func genValue(t *rapid.T, depth int) jv {
	kinds := "nbdsao"
	if depth >= 3 {
		kinds = "nbds"
	}
	switch k := kinds[rapid.IntRange(0, len(kinds)-1).Draw(t, "kind")]; k {
	case 'n':
		return jv{kind: k}
	case 'b':
		return jv{kind: k, b: rapid.Bool().Draw(t, "bool")}
	case 'd':
		return jv{kind: k, d: genNumber(t)}
	case 's':
		return jv{kind: k, s: genString(t, "str")}
	case 'a':
		v := jv{kind: k}
		for i, n := 0, rapid.IntRange(0, 3).Draw(t, "len"); i < n; i++ {
			v.items = append(v.items, genValue(t, depth+1))
		}
		return v
	default:
		v := jv{kind: 'o'}
		seen := map[string]bool{}
		for i, n := 0, rapid.IntRange(0, 4).Draw(t, "len"); i < n; i++ {
			key := genString(t, "key")
			if seen[key] {
				continue
			}
			seen[key] = true
			v.keys = append(v.keys, key)
			v.items = append(v.items, genValue(t, depth+1))
		}
		sortJCS(&v)
		return v
	}
}

// sortJCS orders members by UTF-16 code units, as RFC 8785 requires.
func sortJCS(v *jv) {
	idx := make([]int, len(v.keys))
	for i := range idx {
		idx[i] = i
	}
	u := func(s string) []uint16 { return utf16.Encode([]rune(s)) }
	sort.Slice(idx, func(a, b int) bool {
		x, y := u(v.keys[idx[a]]), u(v.keys[idx[b]])
		for i := 0; i < len(x) && i < len(y); i++ {
			if x[i] != y[i] {
				return x[i] < y[i]
			}
		}
		return len(x) < len(y)
	})
	keys, items := make([]string, len(idx)), make([]jv, len(idx))
	for i, j := range idx {
		keys[i], items[i] = v.keys[j], v.items[j]
	}
	v.keys, v.items = keys, items
}

// writer spells a jv canonically except at one chosen mutation site, where
// it uses another valid spelling of the same value.
type writer struct {
	sb     strings.Builder
	sites  int
	mutate int // index of the site to respell; -1 for none
}

func (w *writer) site() bool {
	hit := w.sites == w.mutate
	w.sites++
	return hit
}

func (w *writer) value(v jv) {
	if w.site() {
		w.sb.WriteString(" ")
	}
	switch v.kind {
	case 'n':
		w.sb.WriteString("null")
	case 'b':
		w.sb.WriteString(strconv.FormatBool(v.b))
	case 'd':
		w.number(v.d)
	case 's':
		w.str(v.s)
	case 'a':
		w.sb.WriteByte('[')
		for i, e := range v.items {
			if i > 0 {
				w.sb.WriteByte(',')
			}
			w.value(e)
		}
		w.sb.WriteByte(']')
	case 'o':
		w.object(v)
	}
}

func (w *writer) object(v jv) {
	order := make([]int, len(v.keys))
	for i := range order {
		order[i] = i
	}
	if len(order) >= 2 && w.site() {
		order[0], order[1] = order[1], order[0]
	}
	w.sb.WriteByte('{')
	for i, j := range order {
		if i > 0 {
			w.sb.WriteByte(',')
		}
		w.str(v.keys[j])
		w.sb.WriteByte(':')
		w.value(v.items[j])
	}
	w.sb.WriteByte('}')
}

func (w *writer) number(f float64) {
	text, err := jcs.NumberToJSON(f)
	if err != nil {
		panic(err)
	}
	if !w.site() {
		w.sb.WriteString(text)
		return
	}
	switch {
	case strings.Contains(text, "e"):
		w.sb.WriteString(strings.Replace(text, "e", "E", 1))
	case strings.Contains(text, "."):
		w.sb.WriteString(text + "0")
	default:
		w.sb.WriteString(text + ".0")
	}
}

func (w *writer) str(s string) {
	w.sb.WriteByte('"')
	for _, r := range s {
		if w.site() {
			w.sb.WriteString(altEscape(r))
			continue
		}
		w.sb.WriteString(canonicalRune(r))
	}
	w.sb.WriteByte('"')
}

func canonicalRune(r rune) string {
	switch r {
	case '"':
		return `\"`
	case '\\':
		return `\\`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	if r < 0x20 {
		return `\u00` + strconv.FormatInt(int64(r)>>4, 16) + strconv.FormatInt(int64(r)&15, 16)
	}
	return string(r)
}

// altEscape is a valid but non-canonical spelling of r.
func altEscape(r rune) string {
	if r == '/' {
		return `\/`
	}
	var b strings.Builder
	for _, u := range utf16.Encode([]rune{r}) {
		h := strconv.FormatUint(uint64(u)|0x10000, 16)[1:]
		if r < 0x20 {
			h = strings.ToUpper(h) // canonical is lower-case; upper differs
		}
		b.WriteString(`\u` + h)
	}
	return b.String()
}

// TestVerifyCanonicalRejectsEveryOtherSpelling: for a random document, the
// canonical spelling verifies, and every single respelling (whitespace,
// member order, number form, string escape) is refused by VerifyCanonical
// while still canonicalizing to the same bytes.
func TestVerifyCanonicalRejectsEveryOtherSpelling(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := genValue(t, 0)
		base := &writer{mutate: -1}
		base.value(v)
		canonical := base.sb.String()
		got, err := Canonicalize([]byte(canonical))
		if err != nil || string(got) != canonical {
			t.Fatalf("generator is not canonical: %q -> %q, %v", canonical, got, err)
		}
		if err := VerifyCanonical([]byte(canonical)); err != nil {
			t.Fatalf("canonical refused: %v", err)
		}
		site := rapid.IntRange(0, base.sites-1).Draw(t, "site")
		alt := &writer{mutate: site}
		alt.value(v)
		spelled := alt.sb.String()
		if spelled == canonical {
			t.Fatalf("site %d produced no change", site)
		}
		if err := VerifyCanonical([]byte(spelled)); CodeOf(err) != CodeNotCanonical {
			t.Fatalf("VerifyCanonical(%q) = %v, want not_canonical", spelled, err)
		}
		back, err := Canonicalize([]byte(spelled))
		if err != nil || string(back) != canonical {
			t.Fatalf("Canonicalize(%q) = %q, %v; want %q", spelled, back, err, canonical)
		}
	})
}

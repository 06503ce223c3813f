package canon

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/gowebpki/jcs"
)

// The SHA-256 of the first N lines of the ES6 number file, as published in
// the RFC 8785 reference repository (testdata/README.md there).
var es6Published = map[int]string{
	1_000:     "be18b62b6f69cdab33a7e0dae0d9cfa869fda80ddc712221570f9f40a5878687",
	10_000:    "b9f7a8e75ef22a835685a52ccba7f7d6bdc99e34b010992cbc5864cd12be6892",
	1_000_000: "49415fee2c56c77864931bd3624faad425c3c577d6d74e89a83bc725506dad16",
}

// es6Numbers yields the reference's deterministic double sequence: the
// fixed edge values, 2,000 consecutive doubles from the smallest normal,
// then little-endian words of a SHA-256 chain (skipping 0, NaN and ±Inf).
type es6Numbers struct {
	static []uint64
	idx    int
	block  [sha256.Size]byte
	data   []byte
}

func newES6Numbers(t testing.TB) *es6Numbers {
	f, err := os.Open("testdata/jcs/es6-static.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g := &es6Numbers{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, err := strconv.ParseUint(sc.Text(), 16, 64)
		if err != nil {
			t.Fatalf("es6-static.txt: %v", err)
		}
		g.static = append(g.static, v)
	}
	if len(g.static) != 168 {
		t.Fatalf("es6-static.txt: want 168 values, got %d", len(g.static))
	}
	return g
}

func (g *es6Numbers) next() float64 {
	const serial = 2000
	defer func() { g.idx++ }()
	if g.idx < len(g.static) {
		return math.Float64frombits(g.static[g.idx])
	}
	if g.idx < len(g.static)+serial {
		return math.Float64frombits(0x0010000000000000 + uint64(g.idx-len(g.static)))
	}
	for {
		if len(g.data) == 0 {
			g.block = sha256.Sum256(g.block[:])
			g.data = g.block[:]
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(g.data))
		g.data = g.data[8:]
		if f != 0 && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f
		}
	}
}

// TestJCSNumberCorpus formats the first 10^6 numbers of the sequence with
// the formatter behind Canonicalize and compares the SHA-256 of the
// "hex,text\n" lines with the published values at 10^3, 10^4 and 10^6.
// It takes well under a second without -race and a few seconds with it.
func TestJCSNumberCorpus(t *testing.T) {
	g := newES6Numbers(t)
	h := sha256.New()
	line := make([]byte, 0, 64)
	for n := 1; n <= 1_000_000; n++ {
		f := g.next()
		text, err := jcs.NumberToJSON(f)
		if err != nil {
			t.Fatalf("line %d: %x: %v", n, math.Float64bits(f), err)
		}
		line = strconv.AppendUint(line[:0], math.Float64bits(f), 16)
		line = append(line, ',')
		line = append(line, text...)
		line = append(line, '\n')
		h.Write(line)
		if want, ok := es6Published[n]; ok {
			if got := hex.EncodeToString(h.Sum(nil)); got != want {
				t.Fatalf("SHA-256 of the first %d lines = %s, published %s", n, got, want)
			}
		}
	}
}

// TestNumbersAreFixedPoints feeds the formatted edge values back through
// Canonicalize: canonical number text must come out unchanged, or be
// refused by the integer rule (never silently respelled).
func TestNumbersAreFixedPoints(t *testing.T) {
	g := newES6Numbers(t)
	for n := 0; n < 168+2000+5000; n++ {
		f := g.next()
		text, err := jcs.NumberToJSON(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Canonicalize([]byte(text))
		if CodeOf(err) == CodeIntegerRange {
			continue
		}
		if err != nil || string(got) != text {
			t.Fatalf("%s: Canonicalize = %q, %v", text, got, err)
		}
	}
}

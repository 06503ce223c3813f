package evidence

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"strconv"
)

// Version is a vLLM release version, ordered as PEP 440 orders it:
// 0.30.0.dev12 < 0.30.0rc1 < 0.30.0 < 0.30.0.post1; a local label
// (+g1234abc) sorts after the same public version.
type Version struct {
	Major, Minor, Patch int
	Pre                 string // "", "a", "b" or "rc"
	PreN                int
	Post                int // -1 when absent
	Dev                 int // -1 when absent
	Local               string
	raw                 string
}

var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)(?:\.(\d+))?(?:(a|b|rc)(\d+))?(?:\.post(\d+))?(?:\.dev(\d+))?(?:\+([0-9a-z]+(?:\.[0-9a-z]+)*))?$`)

// ParseVersion reads strings such as "0.29.0", "0.29.1rc1" and
// "0.30.0.dev12+g1234abc".
func ParseVersion(s string) (Version, error) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return Version{}, fmt.Errorf("engine version %q: want a PEP 440 release such as 0.29.0, 0.29.1rc1 or 0.30.0.dev12+g1234abc", s)
	}
	v := Version{Pre: m[4], Post: -1, Dev: -1, Local: m[8], raw: s}
	v.Major, v.Minor, v.Patch = atoi(m[1]), atoi(m[2]), atoi(m[3])
	v.PreN = atoi(m[5])
	if m[6] != "" {
		v.Post = atoi(m[6])
	}
	if m[7] != "" {
		v.Dev = atoi(m[7])
	}
	return v, nil
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s) // the pattern admits digits only; "" is 0
	return n
}

func (v Version) String() string { return v.raw }

// Final reports whether v is a final release (no pre-release, no dev).
func (v Version) Final() bool { return v.Pre == "" && v.Dev < 0 }

// SameMinor reports whether v and w share major and minor.
func (v Version) SameMinor(w Version) bool { return v.Major == w.Major && v.Minor == w.Minor }

// Compare orders v and w by PEP 440; it returns -1, 0 or +1.
func (v Version) Compare(w Version) int {
	if c := cmp.Compare(v.Major, w.Major); c != 0 {
		return c
	}
	if c := cmp.Compare(v.Minor, w.Minor); c != 0 {
		return c
	}
	if c := cmp.Compare(v.Patch, w.Patch); c != 0 {
		return c
	}
	if c := cmp.Compare(v.preRank(), w.preRank()); c != 0 {
		return c
	}
	if c := cmp.Compare(v.PreN, w.PreN); c != 0 {
		return c
	}
	if c := cmp.Compare(v.Post, w.Post); c != 0 {
		return c
	}
	if c := cmp.Compare(devKey(v.Dev), devKey(w.Dev)); c != 0 {
		return c
	}
	return cmp.Compare(v.Local, w.Local)
}

// preRank places a bare dev release before every pre-release of the same
// version, and the final release after them.
func (v Version) preRank() int {
	switch {
	case v.Pre == "" && v.Post < 0 && v.Dev >= 0:
		return -1
	case v.Pre == "a":
		return 0
	case v.Pre == "b":
		return 1
	case v.Pre == "rc":
		return 2
	}
	return 3
}

func devKey(d int) int {
	if d < 0 {
		return math.MaxInt
	}
	return d
}

package evidence

import "testing"

func TestParseVersion(t *testing.T) {
	cases := []struct {
		in                  string
		major, minor, patch int
		pre                 string
		preN, dev           int
		local               string
		final               bool
	}{
		{"0.29.0", 0, 29, 0, "", 0, -1, "", true},
		{"0.29.1rc1", 0, 29, 1, "rc", 1, -1, "", false},
		{"0.30.0.dev12+g1234abc", 0, 30, 0, "", 0, 12, "g1234abc", false},
		{"v0.10.1", 0, 10, 1, "", 0, -1, "", true},
		{"1.2", 1, 2, 0, "", 0, -1, "", true},
	}
	for _, c := range cases {
		v, err := ParseVersion(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if v.Major != c.major || v.Minor != c.minor || v.Patch != c.patch || v.Pre != c.pre || v.PreN != c.preN || v.Dev != c.dev || v.Local != c.local || v.Final() != c.final {
			t.Errorf("%s parsed as %+v", c.in, v)
		}
	}
	for _, bad := range []string{"", "latest", "0.29.0-rc1x", "0.29.0+", "0.29.0+G1"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestVersionOrderPEP440(t *testing.T) {
	ascending := []string{"0.29.0", "0.29.1.dev3", "0.29.1a1", "0.29.1b2", "0.29.1rc1.dev1", "0.29.1rc1", "0.29.1rc2", "0.29.1", "0.29.1+local", "0.29.1.post1", "0.30.0.dev12+g1234abc", "0.30.0", "1.0.0"}
	for i := range ascending {
		for j := range ascending {
			a, b := *vp(ascending[i]), *vp(ascending[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Compare(b); got != want {
				t.Errorf("Compare(%s, %s) = %d, want %d", ascending[i], ascending[j], got, want)
			}
		}
	}
}

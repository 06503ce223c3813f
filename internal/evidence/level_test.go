package evidence

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// "maintainer-lab measured > independently reproduced > authoritative-external
// > community-reported > calculated-only"
func TestLevelOrderTotal(t *testing.T) {
	for i := range Levels {
		for j := range Levels {
			if got, want := Levels[i].Stronger(Levels[j]), i < j; got != want {
				t.Errorf("%s stronger than %s = %v", Levels[i], Levels[j], got)
			}
		}
	}
	if Level("best").Valid() {
		t.Error("unknown level valid")
	}
}

var subj = map[string]string{"artifact": "a", "hardware_class": "h100"}

func boot(level Level, verdict, engine string) Record {
	return rec(KindBoot, ScopeBoot, level, verdict, engine, subj)
}

func TestConflictRule(t *testing.T) {
	lab := func(v, e string) Record { return boot(MaintainerLabMeasured, v, e) }
	com := func(v, e string) Record { return boot(CommunityReported, v, e) }
	value := func(l Level, x, tol float64) Record {
		r := boot(l, "", "0.29.0")
		r.Claim = Claim{Quantity: "kv_bytes", Value: &x, Tolerance: tol}
		return r
	}
	cases := []struct {
		sentence  string
		records   []Record
		contested bool
		winner    int // index into records, -1 for none
	}{
		{"Within a level, the record at the newer engine version wins.",
			[]Record{lab("failed", "0.29.0"), lab(VerdictHealthy, "0.30.0")}, false, 1},
		{"Within a level, newer by PEP 440 (0.30.0 beats 0.30.0rc1).",
			[]Record{com(VerdictHealthy, "0.30.0"), com("failed", "0.30.0rc1")}, false, 0},
		{"Within a level, same engine version: contested (narwhal; picking one would auto-resolve).",
			[]Record{lab("failed", "0.29.0"), lab(VerdictHealthy, "0.29.0")}, true, -1},
		{"Within a level, unparsable engine version: contested.",
			[]Record{lab("failed", "main"), lab(VerdictHealthy, "0.29.0")}, true, -1},
		{"Across levels, a disagreement is marked contested and both records are shown; nothing auto-resolves.",
			[]Record{lab("failed", "0.29.0"), com(VerdictHealthy, "0.30.0")}, true, -1},
		{"Independently-reproduced is a level, not a multiplier: ten community reports do not outrank one lab record.",
			append([]Record{lab("failed", "0.29.0")}, repeatCommunity(10)...), true, -1},
		{"Agreement within tolerance is not a conflict; the strongest record leads.",
			[]Record{value(CommunityReported, 100, 3), value(MaintainerLabMeasured, 104, 2)}, false, 1},
		{"Values beyond the sum of tolerances disagree.",
			[]Record{value(CommunityReported, 100, 1), value(MaintainerLabMeasured, 104, 2)}, true, -1},
	}
	for _, c := range cases {
		t.Run(c.sentence, func(t *testing.T) {
			res, err := Resolve(c.records)
			if err != nil || len(res) != 1 {
				t.Fatalf("Resolve: %v, %d keys", err, len(res))
			}
			r := res[0]
			if r.Contested != c.contested {
				t.Fatalf("contested = %v, want %v (notes %v)", r.Contested, c.contested, r.Notes)
			}
			want := ""
			if c.winner >= 0 {
				want, _ = c.records[c.winner].Digest()
			}
			if r.Winner != want {
				t.Fatalf("winner %s, want %s", r.Winner, want)
			}
			if len(r.Shown) != len(uniqueDigests(c.records)) {
				t.Fatalf("shown %d records of %d: nothing may be hidden", len(r.Shown), len(c.records))
			}
		})
	}
}

func repeatCommunity(n int) []Record {
	var out []Record
	for i := 0; i < n; i++ {
		r := boot(CommunityReported, VerdictHealthy, "0.30.0")
		r.Provenance.Producer = "operator-" + strings.Repeat("x", i+1)
		out = append(out, r)
	}
	return out
}

func uniqueDigests(rs []Record) map[string]bool {
	m := map[string]bool{}
	for _, r := range rs {
		d, _ := r.Digest()
		m[d] = true
	}
	return m
}

func TestResolutionOrderStable(t *testing.T) {
	rs := []Record{boot(MaintainerLabMeasured, VerdictHealthy, "0.30.0"), boot(CommunityReported, VerdictHealthy, "0.29.0"),
		boot(AuthoritativeExternal, "failed", "0.28.0"), boot(MaintainerLabMeasured, VerdictHealthy, "0.29.1")}
	want, _ := Resolve(rs)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20; i++ {
		s := append([]Record(nil), rs...)
		rng.Shuffle(len(s), func(a, b int) { s[a], s[b] = s[b], s[a] })
		got, _ := Resolve(s)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("shuffled input changed the resolution")
		}
	}
	if d, _ := rs[0].Digest(); want[0].Shown[0] != d {
		t.Fatalf("shown order does not start with the strongest, newest record")
	}
}

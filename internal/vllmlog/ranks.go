package vllmlog

import (
	"regexp"
	"strconv"
	"strings"
)

// Which worker a line speaks for: the rank-assignment lines [r1] and the
// worker prefix names [n1] (sources in patterns.go).

// Ranks are a worker's coordinates as the log states them; nil is not
// stated.
type Ranks struct {
	Rank, DP, PP, TP *int
}

// RankLine reads a rank-assignment line [r1]: "rank R in world size W is
// assigned as DP rank …" (every coordinate) or "world_size=W rank=R …"
// (the rank only). world is W; ok is false for any other line.
func RankLine(msg string) (r Ranks, world string, ok bool) {
	if !strings.Contains(msg, " rank") && !strings.Contains(msg, "world_size=") {
		return Ranks{}, "", false
	}
	if m := assignRE.FindStringSubmatch(msg); m != nil {
		return Ranks{Rank: intPtr(m[1]), DP: intPtr(m[3]), PP: intPtr(m[4]), TP: intPtr(m[5])}, m[2], true
	}
	if m := worldRE.FindStringSubmatch(msg); m != nil {
		return Ranks{Rank: intPtr(m[2])}, m[1], true
	}
	return Ranks{}, "", false
}

// WorkerName reads rank coordinates from a prefix name's tokens (Head.Name)
// onto r. The Worker_ scheme [n1] names a group only when its size exceeds
// 1: a missing DP or PP group is rank 0 of a group of one, and a
// "Worker_TP3" name with no DP, PP or PCP group is rank 3 of a
// single-stage, single-replica engine. A bare "Worker" (the name before
// the groups exist) says nothing.
func WorkerName(tokens []string, r *Ranks) {
	if len(tokens) == 0 {
		return
	}
	role := tokens[0]
	groups := map[string]int{}
	for _, t := range tokens[1:] {
		if m := rankTokRE.FindStringSubmatch(t); m != nil {
			r.Rank = intPtr(m[1])
			continue
		}
		if m := nameTokRE.FindStringSubmatch(t); m != nil {
			g := m[1]
			if g == "" && strings.HasPrefix(role, "EngineCore") {
				g = "DP" // "EngineCore_0" names the data-parallel rank
			}
			if v, err := strconv.Atoi(m[2]); err == nil && g != "" {
				groups[g] = v
			}
		}
	}
	setGroup(groups, "DP", &r.DP)
	setGroup(groups, "PP", &r.PP)
	setGroup(groups, "TP", &r.TP)
	if role == "Worker" && len(tokens) > 1 {
		_, dp := groups["DP"]
		_, pp := groups["PP"]
		_, pcp := groups["PCP"]
		if !pp {
			zero := 0
			r.PP = &zero
		}
		if !dp {
			zero := 0
			r.DP = &zero
		}
		if tp, ok := groups["TP"]; ok && !dp && !pp && !pcp && r.Rank == nil {
			rank := tp
			r.Rank = &rank
		}
	}
}

func setGroup(groups map[string]int, g string, dst **int) {
	if v, ok := groups[g]; ok {
		*dst = &v
	}
}

func intPtr(s string) *int {
	v, err := strconv.Atoi(s)
	if err != nil {
		return nil
	}
	return &v
}

var (
	assignRE  = regexp.MustCompile(`\brank ([0-9]+) in world size ([0-9]+) is assigned as DP rank ([0-9]+), PP rank ([0-9]+), (?:PCP rank [0-9]+, )?TP rank ([0-9]+)`)
	worldRE   = regexp.MustCompile(`\bworld_size=([0-9]+) rank=([0-9]+) local_rank=[0-9]+ distributed_init_method=`)
	nameTokRE = regexp.MustCompile(`^(DP|PP|PCP|TP|DCP|EP)?([0-9]+)$`)
	rankTokRE = regexp.MustCompile(`^rank=([0-9]+)$`)
)

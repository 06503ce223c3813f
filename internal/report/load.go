package report

import "fmt"

// Load scores every input, in the order given: bench results files
// (detected by their header) and journals (a path names a rotated set).
// Journals are joined to a bench by request id: to the only bench when
// there is one, else the k-th journal to the k-th bench when the counts
// match.
func Load(paths []string, o Options) ([]*Run, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("report: name at least one journal or bench results file")
	}
	isBench := make([]bool, len(paths))
	var benches []*Run
	for i, p := range paths {
		b, err := IsBench(p)
		if err != nil && !isSet(p) {
			return nil, err
		}
		isBench[i] = b
		if b {
			r, err := ReadBench(p, o)
			if err != nil {
				return nil, err
			}
			benches = append(benches, r)
		}
	}
	journals := len(paths) - len(benches)
	if o.SLO.TTFT <= 0 && len(benches) > 0 {
		o.SLO = benches[0].SLO
	}
	runs := make([]*Run, 0, len(paths))
	bi, ji := 0, 0
	for i, p := range paths {
		if isBench[i] {
			runs = append(runs, benches[bi])
			bi++
			continue
		}
		var pair *Run
		switch {
		case len(benches) == 1:
			pair = benches[0]
		case len(benches) == journals:
			pair = benches[ji]
		}
		ji++
		if pair != nil && len(benches) == 1 && journals > 1 {
			pair = pair.fresh()
		}
		r, err := ReadJournal(p, pair, o)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// fresh is a bench run whose join index forgets earlier matches, for a
// second journal joined to the same bench.
func (r *Run) fresh() *Run {
	c := *r
	c.index = &benchIndex{step: r.index.step, taken: map[string]bool{}, notSent: r.index.notSent}
	return &c
}

// isSet says whether path is a rotated journal set without its active
// file (IsBench cannot open it, but the set reads).
func isSet(path string) bool {
	files, err := setFiles(path)
	return err == nil && len(files) > 0
}

package fleet

import "strconv"

func itoa(n int) string { return strconv.Itoa(n) }

// readEngines reads the engine list at key. Entries that cannot be read
// are reported and dropped; iids are compared across every entry that
// names one (stage 5), whatever else is wrong with it.
func readEngines(top section, key string, v any) []Engine {
	list, ok := v.([]any)
	if !ok {
		top.wrongKind(key, "a list")
		return nil
	}
	if len(list) == 0 {
		noEngines(top.ps)
		return nil
	}
	engines := make([]Engine, 0, len(list))
	seen := iidSeen{}
	for i, item := range list {
		if e, ok := readEngine(top, i, item, seen); ok {
			engines = append(engines, e)
		}
	}
	if len(engines) < len(list) {
		// Rules over the engine count (the role floors) would judge a
		// shorter fleet than the one written.
		top.ps.broken[key] = true
	}
	return engines
}

// readEngine reads engines[i]. An entry without one of its required keys
// is reported and dropped.
func readEngine(top section, i int, item any, seen iidSeen) (Engine, bool) {
	ps := top.ps
	path := "engines[" + itoa(i) + "]"
	m, ok := item.(map[string]any)
	if !ok {
		ps.add(path, "%s must be an object", path)
		return Engine{}, false
	}
	s := section{path: path, m: m, ps: ps, lookup: top.lookup}
	var e Engine
	fs := engineFields(&e)
	s.unknownKeys(names(fs)...)
	if iid, isStr := m["iid"].(string); isStr {
		seen.check(ps, i, iid)
	}
	missing := false
	for _, f := range fs {
		if _, present := m[f.name]; f.required && !present {
			ps.add(s.field(f.name), "%s is missing '%s'", path, f.name)
			missing = true
		}
	}
	if missing {
		return Engine{}, false
	}
	applyDefaults(fs)
	s.readFields(fs)
	return e, true
}

// iidSeen maps each instance id to the index of the entry that used it
// first.
type iidSeen map[string]int

// check reports engines[i] when its iid was used before (stage 5).
func (seen iidSeen) check(ps *problems, i int, iid string) {
	first, dup := seen[iid]
	if !dup {
		seen[iid] = i
		return
	}
	f := "engines[" + itoa(i) + "].iid"
	ps.addAt(StageEngineIDs, f, "%s repeats an instance id '%s' (first used by engines[%d]); give every engine its own iid", f, iid, first)
}

// noEngines keeps the reference's sentence, "P declares no engines".
func noEngines(ps *problems) {
	ps.addAt(StageEngineIDs, "engines", "declares no engines")
	ps.list[len(ps.list)-1].continues = true
	ps.broken["engines"] = true // nothing to count for the role floors
}

// readRole reads engines[].role: 'prefill' or 'decode'.
func readRole(s section, key string, v any, dst *Role) {
	r, isStr := v.(string)
	if !isStr {
		s.wrongKind(key, "a string")
		return
	}
	if r != string(Prefill) && r != string(Decode) {
		s.ps.add(s.field(key), "%s must be 'prefill' or 'decode', got '%s'", s.field(key), r)
		return
	}
	*dst = Role(r)
}

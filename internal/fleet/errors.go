package fleet

import (
	"fmt"
	"sort"
	"strings"
)

// Problem is one thing wrong with a fleet document.
type Problem struct {
	Field   string // public path, e.g. "serving.max_connections"; "" for the document
	Message string // a full sentence that starts with or names the field
	Stage   int    // the loading stage whose rule found it (StageParse … StageCross)

	// continues is set when Message continues the sentence "<source> …"
	// ("fleet.json declares no engines") instead of following "<source>: ".
	continues bool
}

// Stages of loading. They order the problems and say which kind of rule
// found each one; they no longer gate each other: every independent
// problem is reported in one LoadError. Only a document that does not
// parse, or whose root is not an object, stops at its first problem.
const (
	StageParse     = 1 // JSON syntax, UTF-8, non-finite literals, duplicate keys
	StageIdentity  = 2 // root object, schema, schema_version
	StageTopLevel  = 3 // unknown and missing top-level keys
	StageFields    = 4 // kinds, unknown keys, enums, references, URLs, the serving policy
	StageEngineIDs = 5 // at least one engine, unique iids
	StageCross     = 6 // ranges and relations between fields
)

// LoadError is every problem found in one fleet document, grouped by
// stage and in document order within a stage. errors.As finds it through
// wrapping.
type LoadError struct {
	Source   string // the fleet path as the caller gave it
	Stage    int    // the earliest stage with a problem
	Problems []Problem
	Err      error // the I/O error of a file that could not be read, nil otherwise
}

// Error renders "P: p1; p2", or "P declares no engines; p2" when the first
// problem continues the source's sentence.
func (e *LoadError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Message
	}
	sep := ": "
	if len(e.Problems) > 0 && e.Problems[0].continues {
		sep = " "
	}
	return e.Source + sep + strings.Join(msgs, "; ")
}

func (e *LoadError) Unwrap() error { return e.Err }

// Lines renders one line per problem, each starting with the source.
func (e *LoadError) Lines() []string {
	out := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		sep := ": "
		if p.continues {
			sep = " "
		}
		out[i] = e.Source + sep + p.Message
	}
	return out
}

// problems collects the problems of one document across all stages, and
// the fields whose value could not be read, so that rules reading them are
// skipped instead of judging a placeholder.
type problems struct {
	list   []Problem
	stage  int             // the stage new problems belong to
	broken map[string]bool // field paths with a key, kind or reference problem
}

func newProblems(stage int) *problems {
	return &problems{stage: stage, broken: map[string]bool{}}
}

// add records a problem of the current stage. A problem found while
// reading keys and fields marks its field broken.
func (ps *problems) add(field, format string, args ...any) {
	ps.addAt(ps.stage, field, format, args...)
}

func (ps *problems) addAt(stage int, field, format string, args ...any) {
	ps.list = append(ps.list, Problem{Field: field, Message: fmt.Sprintf(format, args...), Stage: stage})
	if stage == StageTopLevel || stage == StageFields {
		ps.broken[field] = true
	}
}

// ok reports whether none of fields, nor a section holding one of them,
// is broken: a rule over them judges values the document really gave.
func (ps *problems) ok(fields ...string) bool {
	for _, f := range fields {
		for p := f; ; {
			if ps.broken[p] {
				return false
			}
			i := strings.LastIndexByte(p, '.')
			if i < 0 {
				break
			}
			p = p[:i]
		}
	}
	return true
}

// intact is ok for a whole section: neither it, a section holding it, nor
// any field inside it is broken.
func (ps *problems) intact(section string) bool {
	if !ps.ok(section) {
		return false
	}
	for f := range ps.broken {
		if strings.HasPrefix(f, section+".") {
			return false
		}
	}
	return true
}

// err is nil without problems, else a LoadError with the problems ordered
// by stage (document order kept within a stage).
func (ps *problems) err(source string) error {
	if len(ps.list) == 0 {
		return nil
	}
	sort.SliceStable(ps.list, func(i, j int) bool { return ps.list[i].Stage < ps.list[j].Stage })
	return &LoadError{Source: source, Stage: ps.list[0].Stage, Problems: ps.list}
}

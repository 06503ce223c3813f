package fleet

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with a fleet document.
type Problem struct {
	Field   string // public path, e.g. "serving.max_connections"; "" for the document
	Message string // a full sentence that starts with or names the field
}

// Stages of loading; the first stage that finds a problem ends the load.
const (
	StageParse     = 1
	StageIdentity  = 2
	StageTopLevel  = 3
	StageFields    = 4
	StageEngineIDs = 5
	StageCross     = 6
)

// LoadError is every problem one loading stage found. errors.As finds it
// through wrapping.
type LoadError struct {
	Source   string // the fleet path as the caller gave it
	Stage    int
	Problems []Problem
	Err      error // the I/O error of stage 1, nil otherwise
}

// Error renders "P: p1; p2", or for stage 5 "P declares no engines".
func (e *LoadError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Message
	}
	if e.Stage == StageEngineIDs {
		return e.Source + " " + strings.Join(msgs, "; ")
	}
	return e.Source + ": " + strings.Join(msgs, "; ")
}

func (e *LoadError) Unwrap() error { return e.Err }

// Lines renders one line per problem, each prefixed like Error.
func (e *LoadError) Lines() []string {
	sep := ": "
	if e.Stage == StageEngineIDs {
		sep = " "
	}
	out := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = e.Source + sep + p.Message
	}
	return out
}

// problems collects the problems of one stage.
type problems []Problem

func (ps *problems) add(field, format string, args ...any) {
	*ps = append(*ps, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (ps problems) err(source string, stage int) error {
	if len(ps) == 0 {
		return nil
	}
	return &LoadError{Source: source, Stage: stage, Problems: ps}
}

package state

import (
	"errors"
	"fmt"
	"strconv"
)

// Problem is one thing wrong with a handoff document: which file, which
// field (its public JSON path), what is wrong and how to fix it. Error()
// is one line.
type Problem struct {
	File  string // "" when the document did not come from a file
	Field string // e.g. "lifecycle.process_starts.e9"; "" for the whole document
	Msg   string
	Fix   string
}

func (p *Problem) Error() string {
	s := "handoff"
	if p.Field != "" {
		s += " field " + p.Field
	}
	s += ": " + p.Msg
	if p.Fix != "" {
		s += "; " + p.Fix
	}
	if p.File != "" {
		s = p.File + ": " + s
	}
	return s
}

func problem(field, msg, fix string, args ...any) *Problem {
	return &Problem{Field: field, Msg: fmt.Sprintf(msg, args...), Fix: fix}
}

// VersionError is a schema_version this build does not read. A reader
// must stop on it (startup aborts; a standby stops following) rather than
// guess at a format it does not know.
type VersionError struct {
	File    string
	Doc     string // "handoff" (when empty) or "lease"
	Version string // as written; may not be an integer
}

func (e *VersionError) Error() string {
	doc := e.Doc
	if doc == "" {
		doc = "handoff"
	}
	s := doc + " schema version " + e.Version + " " + e.what() + " (writes and reads " +
		strconv.Itoa(HandoffSchemaVersion) + ")"
	if e.File != "" {
		s = e.File + ": " + s
	}
	return s
}

func (e *VersionError) what() string {
	n, err := strconv.Atoi(e.Version)
	switch {
	case err != nil || n < 0:
		return "is not a nonnegative integer"
	case n > HandoffSchemaVersion:
		return "is newer than this build"
	default:
		return "is not readable by this build"
	}
}

// withFile stamps the file name onto a Problem or VersionError.
func withFile(err error, file string) error {
	var p *Problem
	if errors.As(err, &p) {
		c := *p
		c.File = file
		return &c
	}
	var v *VersionError
	if errors.As(err, &v) {
		c := *v
		c.File = file
		return &c
	}
	return fmt.Errorf("%s: %w", file, err)
}

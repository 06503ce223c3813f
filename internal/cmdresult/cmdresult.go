// Package cmdresult is the narwhal.command-result v1 envelope that every
// command with --format json prints: exactly one JSON object on stdout,
// keys sorted, secrets redacted, the exit code derived from the status.
package cmdresult

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// Schema and SchemaVersion identify the envelope.
const (
	Schema        = "narwhal.command-result"
	SchemaVersion = 1
)

// Status is the outcome class of a command; each maps to one exit code.
type Status string

const (
	Success      Status = "success"
	FailedGate   Status = "failed_gate"
	InvalidInput Status = "invalid_input"
	Degraded     Status = "degraded"
	Error        Status = "error"
	Interrupted  Status = "interrupted"
)

// ExitCode is the process exit code for s.
func (s Status) ExitCode() int {
	switch s {
	case Success:
		return 0
	case FailedGate:
		return 1
	case InvalidInput:
		return 2
	case Degraded:
		return 3
	case Interrupted:
		return 130
	default:
		return 4
	}
}

// Problem is one entry of errors[].
type Problem struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Command string         `json:"command"`
	Stage   string         `json:"stage,omitempty"`
	Engine  string         `json:"engine,omitempty"`
	Field   string         `json:"field,omitempty"`
	Context map[string]any `json:"context,omitempty"`
}

// Artifact is one file a command created, updated or looked at.
type Artifact struct {
	Kind  string `json:"kind"`
	Path  string `json:"path"`
	State string `json:"state"` // created, updated, existing, missing
}

// Result is the envelope. Command and Operation name what ran.
type Result struct {
	Command   string
	Operation string
	Status    Status
	Data      any
	Artifacts []Artifact
	Errors    []Problem
}

// Write prints r as one line of sorted-key JSON, redacted with red.
func (r Result) Write(w io.Writer, red *Redactor) error {
	data := r.Data
	if data == nil {
		data = map[string]any{}
	}
	arts := r.Artifacts
	if arts == nil {
		arts = []Artifact{}
	}
	errs := r.Errors
	if errs == nil {
		errs = []Problem{}
	}
	doc := map[string]any{
		"schema":         Schema,
		"schema_version": SchemaVersion,
		"command":        r.Command,
		"operation":      r.Operation,
		"status":         string(r.Status),
		"exit_code":      r.Status.ExitCode(),
		"data":           data,
		"artifacts":      arts,
		"errors":         errs,
	}
	// A round trip through generic values sorts the keys of every nested
	// struct too, and lets the redactor see every string.
	generic, err := toGeneric(doc)
	if err != nil {
		return fmt.Errorf("command result: %w", err)
	}
	if red != nil {
		generic = red.Value(generic)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(generic); err != nil {
		return fmt.Errorf("command result: %w", err)
	}
	_, err = w.Write(buf.Bytes())
	return err
}

func toGeneric(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// SortedJSON renders v with every object's keys sorted (nested structs
// included), no HTML escaping, and a trailing newline: the deterministic
// form commands print.
func SortedJSON(v any, indent string) ([]byte, error) {
	generic, err := toGeneric(v)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(generic); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

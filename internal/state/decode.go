package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// Decode parses a narwhal.handoff document strictly: the schema and
// version are checked first (so a newer document reports its version, not
// its new fields), then unknown fields are rejected and the document is
// checked against its own engine list. Configuration checks are Validate's.
func Decode(b []byte) (*Handoff, error) {
	if err := checkHeader(b); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber() // lifecycle events keep their numbers exactly
	var h Handoff
	if err := dec.Decode(&h); err != nil {
		return nil, jsonProblem(err)
	}
	if err := h.validate(h.Engines, "", ""); err != nil {
		return nil, err
	}
	return &h, nil
}

// checkHeader reads only schema and schema_version.
func checkHeader(b []byte) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return problem("", "is empty", "the file is torn")
	}
	var head struct {
		Schema        *string          `json:"schema"`
		SchemaVersion *json.RawMessage `json:"schema_version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return jsonProblem(err)
	}
	if head.Schema == nil || *head.Schema != HandoffSchema {
		return problem("schema", "is not %q", "this file is not a narwhal handoff document", HandoffSchema)
	}
	if head.SchemaVersion == nil {
		return problem("schema_version", "is missing", "this file is not a narwhal handoff document")
	}
	if v := string(*head.SchemaVersion); v != "1" {
		return &VersionError{Version: v}
	}
	return nil
}

// jsonProblem turns encoding/json errors into one-line field problems.
func jsonProblem(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return problem("", "is not valid JSON at byte %d (%v)", "the file is torn or was edited by hand", syn.Offset, err)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(document)"
		}
		return problem(field, "has a JSON %s where %s is expected", "fix the value's type", typ.Value, typ.Type)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return problem("", "ends early", "the file is torn")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return problem(name, "is not a %s v1 field", "remove it", HandoffSchema)
	}
	return problem("", "%v", "", err)
}

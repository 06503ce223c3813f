package canon

import (
	"bytes"
	"encoding/json"
	"errors"
)

// DecodeStrict decodes one JSON document into v, refusing fields v does
// not declare and anything after the document: how a typed record file is
// read when a typo must not pass silently.
func DecodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON document")
	}
	return nil
}

package fleet

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/narwhal-go/narwhal/internal/atomicfile"
)

// savedDocument is the saved layout: identity first, then the sections in
// the order of Config's fields.
type savedDocument struct {
	Schema        string `json:"schema"`
	SchemaVersion int    `json:"schema_version"`
	*Config
}

// MarshalDocument renders the complete, defaulted, replayable document:
// resolved endpoints, no annotations, only the credential variable's name.
func (c *Config) MarshalDocument() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(savedDocument{Schema: Schema, SchemaVersion: SchemaVersion, Config: c}); err != nil {
		return nil, fmt.Errorf("encode fleet document: %w", err)
	}
	return buf.Bytes(), nil
}

// Save writes the document to path atomically (mode 0644 for a new file).
// Resolved endpoints may hold addresses the original kept in the
// environment: save into a path your VCS ignores.
func (c *Config) Save(path string) error {
	data, err := c.MarshalDocument()
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return fmt.Errorf("save fleet: %w", err)
	}
	return nil
}

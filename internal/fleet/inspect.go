package fleet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Effective-config document identity.
const (
	EffectiveSchema        = "narwhal.effective-config"
	EffectiveSchemaVersion = 1
)

// Derived are the values computed from the fleet file.
type Derived struct {
	EngineCount                 int `json:"engine_count"`
	ControlConnections          int `json:"control_connections"`
	DataKeepaliveConnections    int `json:"data_keepalive_connections"`
	ControlKeepaliveConnections int `json:"control_keepalive_connections"`
	MaxConcurrent               int `json:"max_concurrent"`
	HTTPRetainedLimit           int `json:"http_retained_limit"`
	// The key keeps the reference's name for output compatibility; here it
	// is the HTTP server's drain time after SIGTERM.
	UvicornGracefulTimeoutS int `json:"uvicorn_graceful_timeout_s"`
}

// Derive computes the derived values.
func (c *Config) Derive() Derived {
	control := c.Engine.ControlConnections
	if control <= 0 {
		control = max(4, 2*len(c.Engines))
	}
	return Derived{
		EngineCount:                 len(c.Engines),
		ControlConnections:          control,
		DataKeepaliveConnections:    max(1, c.Serving.MaxConnections/2),
		ControlKeepaliveConnections: max(1, control/2),
		MaxConcurrent:               c.Serving.MaxConnections,
		HTTPRetainedLimit:           c.Serving.MaxConnections + c.Serving.QueueCapacity,
		UvicornGracefulTimeoutS:     int(c.Serving.GracefulTimeoutS),
	}
}

// ArtifactPaths are where the fleet's files live, absolute.
type ArtifactPaths struct {
	Profiles string `json:"profiles"`
	State    string `json:"state"`
	Journal  string `json:"journal"`
}

// Effective is the narwhal.effective-config v1 document that
// `narwhal config inspect` prints.
type Effective struct {
	Schema           string         `json:"schema"`
	SchemaVersion    int            `json:"schema_version"`
	Scope            string         `json:"scope"`
	Source           string         `json:"source"`
	WorkingDirectory string         `json:"working_directory"`
	Settings         map[string]any `json:"settings"`
	Derived          Derived        `json:"derived"`
	ArtifactPaths    ArtifactPaths  `json:"artifact_paths"`
}

// Inspect builds the effective-config document for c loaded from source,
// with paths resolved against workdir.
func (c *Config) Inspect(source, workdir string) (*Effective, error) {
	settings, err := c.settings()
	if err != nil {
		return nil, err
	}
	return &Effective{
		Schema:           EffectiveSchema,
		SchemaVersion:    EffectiveSchemaVersion,
		Scope:            "fleet_file",
		Source:           resolvePath(workdir, source),
		WorkingDirectory: workdir,
		Settings:         settings,
		Derived:          c.Derive(),
		ArtifactPaths: ArtifactPaths{
			Profiles: resolvePath(workdir, c.Profiles.Path),
			State:    resolvePath(workdir, c.Recovery.StatePath),
			Journal:  resolvePath(workdir, c.JournalPath()),
		},
	}, nil
}

// settings is the saved document with every optional key spelled out.
func (c *Config) settings() (map[string]any, error) {
	data, err := c.MarshalDocument()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("inspect fleet: %w", err)
	}
	for _, e := range m["engines"].([]any) {
		entry := e.(map[string]any)
		if _, ok := entry["pin"]; !ok {
			entry["pin"] = false
		}
		if _, ok := entry["attestation_url"]; !ok {
			entry["attestation_url"] = ""
		}
	}
	for _, k := range []string{"engine_contract", "hardware"} {
		if _, ok := m[k]; !ok {
			m[k] = nil
		}
	}
	return m, nil
}

// resolvePath makes p absolute against workdir, collapses . and .., and
// resolves symlinks for the part of the path that exists.
func resolvePath(workdir, p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(workdir, p)
	}
	p = filepath.Clean(p)
	existing, rest := p, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			return p
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return p
	}
	return filepath.Join(real, rest)
}

package fleet

import (
	"fmt"
	"strings"
)

// APIKey reads the engine Bearer credential from the variable that
// engine_api_key_env names. It is read when engine clients are built, never
// at load time, and never stored in the Config. An empty name means the
// boundary auth mode: no credential, "" returned.
func (e *EngineSettings) APIKey(lookup LookupFunc) (string, error) {
	if e.EngineAPIKeyEnv == "" {
		return "", nil
	}
	v, ok := lookup(e.EngineAPIKeyEnv)
	if !ok || strings.TrimSpace(v) == "" {
		return "", fmt.Errorf("engine_api_key_env %s is not set in the environment: export it, or clear engine.engine_api_key_env for engines without authentication", e.EngineAPIKeyEnv)
	}
	return v, nil
}

// AuthMode is "engine-credential" when engine calls carry a Bearer token,
// "boundary" when authentication is left to the network boundary.
func (e *EngineSettings) AuthMode() string {
	if e.EngineAPIKeyEnv == "" {
		return "boundary"
	}
	return "engine-credential"
}

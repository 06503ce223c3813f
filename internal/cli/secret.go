package cli

import (
	"os"
	"strings"
)

// AdminToken reads the lifecycle admin token from the variable that
// --admin-token-env names; an empty name means none. narwhal-serve and
// narwhal dev run share it, so the flag means the same in both.
func AdminToken(name string) (string, error) {
	if name == "" {
		return "", nil
	}
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return "", Usage("--admin-token-env %s names an unset or empty variable: export it or drop the flag", name)
	}
	return v, nil
}

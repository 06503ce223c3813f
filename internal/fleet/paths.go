package fleet

import (
	"path/filepath"
	"strings"
)

// cleanPath normalises a stored path lexically: repeated '/' collapse, '.'
// segments and a trailing '/' disappear, '..' stays (it may cross a
// symlink), and an empty path becomes ".".
func cleanPath(p string) string {
	abs := strings.HasPrefix(p, "/")
	var kept []string
	for _, seg := range strings.Split(p, "/") {
		if seg != "" && seg != "." {
			kept = append(kept, seg)
		}
	}
	out := strings.Join(kept, "/")
	switch {
	case abs:
		return "/" + out
	case out == "":
		return "."
	}
	return out
}

// normalizePaths applies cleanPath to the stored paths. An empty
// first-token calibration path means unset and stays empty.
func (c *Config) normalizePaths() {
	c.Profiles.Path = cleanPath(c.Profiles.Path)
	c.Recovery.StatePath = cleanPath(c.Recovery.StatePath)
	if c.Engine.FirstTokenCalibrationPath != "" {
		c.Engine.FirstTokenCalibrationPath = cleanPath(c.Engine.FirstTokenCalibrationPath)
	}
}

// JournalPath is the default request journal: journal.jsonl beside the
// profile store.
func (c *Config) JournalPath() string {
	return filepath.Join(filepath.Dir(c.Profiles.Path), "journal.jsonl")
}

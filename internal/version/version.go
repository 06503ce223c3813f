// Package version holds the build's version string, set at link time:
//
//	go build -ldflags "-X github.com/narwhal-go/narwhal/internal/version.Version=v0.1.0"
package version

import "runtime/debug"

// Version is the release this binary was built from; "dev" for a checkout
// build without ldflags.
var Version = "dev"

// String is the line every command prints for --version.
func String() string {
	v := Version
	if v == "dev" {
		if info, ok := debug.ReadBuildInfo(); ok {
			for _, s := range info.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 12 {
					v = "dev-" + s.Value[:12]
				}
			}
		}
	}
	return "narwhal " + v
}

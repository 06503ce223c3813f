package cli

import "github.com/spf13/pflag"

// FormatFlag declares --format on fs into p: text (the default) or json,
// the narwhal.command-result envelope. One declaration, so every command
// says the same in --help and checks it the same way (CheckFormat).
func FormatFlag(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "format", "text", "output format: text, or json for a narwhal.command-result envelope")
}

// CheckFormat is the usage error for a --format that is neither text nor
// json; nil otherwise.
func CheckFormat(format string) error {
	if format != "text" && format != "json" {
		return Usage("--format must be text or json, got %q", format)
	}
	return nil
}

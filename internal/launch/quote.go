// Package launch renders engine launch plans from typed fleet values: per
// engine the `vllm serve` command line and environment (NixlConnector
// kv_both, ports, TP, NIXL side channel, the API key variable's name) and
// an attestation document skeleton. No string read from a log, a model
// card or an engine response is ever interpolated into a command: every
// value comes from the validated fleet, and every argument is quoted.
package launch

import (
	"regexp"
	"strings"
)

var safeWord = regexp.MustCompile(`^[A-Za-z0-9_./:=,+@%-]+$`)

// Quote renders s as one POSIX shell word: unchanged when it has only
// characters no shell treats specially, else single-quoted with each '
// written as '\”.
func Quote(s string) string {
	if safeWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join quotes every argument and joins them with spaces.
func Join(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = Quote(a)
	}
	return strings.Join(q, " ")
}

package diagnose

import (
	"regexp"
	"strings"

	"github.com/narwhal-go/narwhal/internal/canon"
)

// Message normalization (reference/evidence.md §2.11.3 step 5): the
// volatile parts of an exception message are replaced by placeholders, in
// this order — timestamps, UUIDs and long hex ids, addresses, byte sizes,
// paths, pids, then every remaining number. The template is log text and
// never leaves the package; what leaves is its digest, which two runs of
// the same failure share whatever their numbers, paths and pids.

var normalizeSteps = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`\b[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?`), "<ts>"},
	{regexp.MustCompile(`\b[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?`), "<ts>"},
	{regexp.MustCompile(`\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b`), "<id>"},
	{regexp.MustCompile(`\b0x[0-9a-fA-F]+\b`), "<addr>"},
	{regexp.MustCompile(`\b[0-9a-fA-F]{16,}\b`), "<id>"},
	{regexp.MustCompile(`-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)? ?(?:KiB|MiB|GiB|TiB|KB|MB|GB|TB|bytes|B)\b`), "<size>"},
	{regexp.MustCompile(`(?:[A-Za-z]:)?(?:~|\.{1,2})?(?:/[A-Za-z0-9._@+-]+){2,}/?|\b[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)+\.(?:py|json|so|safetensors|bin|jinja|txt)\b`), "<path>"},
	{regexp.MustCompile(`\bpid[= ][0-9]+|\bPID [0-9]+`), "<pid>"},
	{regexp.MustCompile(`-?\b[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?\b`), "<num>"},
}

// normalizeMessage returns the template of one message.
func normalizeMessage(s string) string {
	for _, st := range normalizeSteps {
		if st.re.MatchString(s) {
			s = st.re.ReplaceAllString(s, st.repl)
		}
	}
	return strings.Join(strings.Fields(s), " ")
}

// templateDigest is the digest of a message's template.
func templateDigest(msg string) string {
	b, err := canon.Marshal(normalizeMessage(msg))
	if err != nil {
		return ""
	}
	return canon.Digest(b)
}

// wrapperTemplates are exceptions that only report that something else
// failed (§2.11.3 step 2): they never become the root cause.
var wrapperMessages = []string{
	"Engine core initialization failed",
	"EngineCore encountered an issue",
	"Worker failed with error",
	"Background loop has errored already",
	"Call to collective_rpc method failed",
	"WorkerProc initialization failed",
	"cancelled",
}

var wrapperClasses = map[string]bool{
	"EngineDeadError": true, "AsyncEngineDeadError": true, "MQEngineDeadError": true, "EngineGenerateError": true,
	"SystemExit": true, "KeyboardInterrupt": true, "asyncio.CancelledError": true, "asyncio.exceptions.CancelledError": true,
	"concurrent.futures._base.CancelledError": true, "vllm.v1.engine.exceptions.EngineDeadError": true,
	"vllm.engine.async_llm_engine.AsyncEngineDeadError": true,
}

// isWrapper reports whether an exception only wraps a root cause.
func isWrapper(e *exception) bool {
	if wrapperClasses[e.class] {
		return true
	}
	for _, w := range wrapperMessages {
		if strings.HasPrefix(e.msg, w) {
			return true
		}
	}
	return false
}

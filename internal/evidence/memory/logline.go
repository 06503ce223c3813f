package memory

import "strings"

// Exported log-line helpers, shared with internal/diagnose so that there is
// one reading of vLLM's process prefixes and logged numbers. They wrap the
// startup-log parser's own helpers; they do not copy them.

// StripANSI removes ANSI colour and cursor escapes from a log line. It
// returns b itself when the line has none.
func StripANSI(b []byte) []byte {
	for i := 0; i < len(b); i++ {
		if b[i] == 0x1b {
			return vlogANSIRE.ReplaceAll(b, nil)
		}
	}
	return b
}

// SplitProcessPrefix finds the process prefix vLLM puts on worker lines —
// the innermost "(EngineCore_DP0 pid=12)", "(VllmWorker TP1 pid=12)",
// "(VllmWorker rank=1 pid=12)", "(RayWorkerWrapper pid=12, ip=10.0.0.1)" —
// before the level word, or anywhere in the line's head when the line has
// no level. It returns the pid and where the text after the prefix starts.
func SplitProcessPrefix(line string) (pid int64, end int, ok bool) {
	head := line[:min(len(line), vlogHeadLen)]
	if !strings.Contains(head, " pid=") {
		return 0, 0, false
	}
	level := vlogLevelRE.FindStringSubmatchIndex(head)
	key, _, has, end := vlogPrefix(line, level)
	if !has {
		return 0, 0, false
	}
	return key.pid, end, true
}

// LogUnitBytes maps a logged unit ("GiB", "MiB", "KiB", "GB", "MB") to its
// size in bytes. gbIsGiB says the printing source divides by 2^30 and
// still prints "GB".
func LogUnitBytes(unit string, gbIsGiB bool) (int64, bool) { return vlogUnitBytes(unit, gbIsGiB) }

// LogDecimalBytes converts a logged decimal ("14.9888", "-0.3") times a
// unit to bytes exactly, by integer arithmetic, rounding half away from
// zero. It fails on anything but [-]digits[.digits] and on results beyond
// ±2^53.
func LogDecimalBytes(num string, unit int64) (int64, error) {
	d, err := vlogParseDecimal(num)
	if err != nil {
		return 0, err
	}
	return d.toBytes(unit)
}

// LogCount reads a logged token or block count, with or without thousands
// separators ("447,088", "2048").
func LogCount(s string) (int64, error) { return vlogParseCount(s) }

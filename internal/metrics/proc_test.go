package metrics

import "os"

// procAvailable reports whether the process collector can read /proc.
func procAvailable() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

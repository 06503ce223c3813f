package httpguard

// Echoable reports whether a client's request id is short and plain
// enough to send back in a response header (printable ASCII, no spaces,
// at most 256 bytes).
func Echoable(id string) bool {
	if len(id) > 256 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

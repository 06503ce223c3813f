package atomicfile

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Lock takes an exclusive advisory lock (flock(2)) on the file at path,
// creating it, and returns its release. It serialises the processes that
// read, change and replace one file (a merge into the profile store, the
// rotation of a shared journal), so that none replaces another's change.
// flock holds on local file systems; over NFS it depends on the client.
func Lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w; check the directory's permissions", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

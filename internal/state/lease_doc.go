package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"syscall"
	"time"

	"github.com/narwhal-go/narwhal/internal/atomicfile"
)

// Lease document identity.
const (
	LeaseSchema        = "narwhal.router-lease"
	LeaseSchemaVersion = 1
)

// Doc is the shared lease file (runtime.md §3.8): exactly these fields.
// Times are wall-clock Unix seconds.
type Doc struct {
	Schema        string  `json:"schema"`
	SchemaVersion int     `json:"schema_version"`
	Epoch         int     `json:"epoch"`
	Holder        string  `json:"holder"`
	ExpiresAt     float64 `json:"expires_at"`
	UpdatedAt     float64 `json:"updated_at"`
}

// Expired reports whether the lease has expired at wall time now.
func (d Doc) Expired(now time.Time) bool { return unixS(now) >= d.ExpiresAt }

func unixS(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func fromUnixS(s float64) time.Time {
	sec, frac := math.Modf(s)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC()
}

// decodeLease parses the lease strictly: a newer version is a
// *VersionError, any other field is refused.
func decodeLease(b []byte) (Doc, error) {
	var head struct {
		Schema        string          `json:"schema"`
		SchemaVersion json.RawMessage `json:"schema_version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return Doc{}, fmt.Errorf("not valid JSON (%v); the file is torn or not a lease", err)
	}
	if head.Schema != LeaseSchema {
		return Doc{}, fmt.Errorf("schema is %q, not %q; this file is not a router lease", head.Schema, LeaseSchema)
	}
	if v := string(head.SchemaVersion); v != "1" {
		return Doc{}, &VersionError{Doc: "lease", Version: v}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var d Doc
	if err := dec.Decode(&d); err != nil {
		return Doc{}, fmt.Errorf("%v; a lease has exactly schema, schema_version, epoch, holder, expires_at, updated_at", err)
	}
	switch {
	case d.Epoch < 1:
		return Doc{}, fmt.Errorf("epoch is %d, must be ≥ 1", d.Epoch)
	case d.Holder == "":
		return Doc{}, errors.New("holder is empty")
	case !finite(d.ExpiresAt) || !finite(d.UpdatedAt):
		return Doc{}, errors.New("expires_at and updated_at must be finite Unix seconds")
	}
	return d, nil
}

// leaseFile is the lease on disk: every operation runs under an exclusive
// flock on <path>.lock, so two routers never both see an absent or
// expired lease and both take it.
type leaseFile struct{ path string }

// FileStore is the file backend: the lease at path, for routers on one
// host or on a shared filesystem that supports flock.
func FileStore(path string) LeaseStore { return leaseFile{path} }

func (f leaseFile) Where() string { return f.path }

func (f leaseFile) Close() error { return nil }

// Read reads the lease under the lock. The file backend ignores ctx: a
// hung filesystem holds the call, and the router fences by its clock.
func (f leaseFile) Read(_ context.Context) (d Doc, ok bool, err error) {
	err = f.locked(func() error {
		d, ok, err = f.read()
		return err
	})
	return d, ok, err
}

// Update runs read, fn and write under one flock: no conflicts here.
func (f leaseFile) Update(_ context.Context, fn func(Doc, bool) (*Doc, error)) error {
	return f.locked(func() error {
		cur, ok, err := f.read()
		if err != nil {
			return err
		}
		next, err := fn(cur, ok)
		if err != nil || next == nil {
			return err
		}
		return f.write(*next)
	})
}

// locked runs fn while holding the exclusive lock.
func (f leaseFile) locked(fn func() error) error {
	lf, err := os.OpenFile(f.path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("lease %s: open lock file: %w (does the shared directory exist and is it writable?)", f.path, err)
	}
	defer lf.Close()
	for {
		err = syscall.Flock(int(lf.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("lease %s: flock %s.lock: %w (the filesystem must support flock)", f.path, f.path, err)
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	return fn()
}

// read returns the lease, or ok=false when there is none. Call it locked.
func (f leaseFile) read() (d Doc, ok bool, err error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return Doc{}, false, nil
	}
	if err != nil {
		return Doc{}, false, fmt.Errorf("lease %s: %w", f.path, err)
	}
	d, err = decodeLease(b)
	if err != nil {
		return Doc{}, false, fmt.Errorf("lease %s: %w; stop every router sharing it, then remove the file", f.path, err)
	}
	return d, true, nil
}

// write replaces the lease atomically. Call it locked.
func (f leaseFile) write(d Doc) error {
	d.Schema, d.SchemaVersion = LeaseSchema, LeaseSchemaVersion
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("lease %s: %w", f.path, err)
	}
	if err := atomicfile.Write(f.path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("lease %s: %w", f.path, err)
	}
	return nil
}

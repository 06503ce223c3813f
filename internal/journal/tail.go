package journal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// Tail reads a journal set incrementally: each Read delivers, as
// Briefs, the whole rows appended since the previous Read, in every file
// of the set (SetFiles), across rotations. It keeps one offset per file,
// keyed by the file's identity (device and inode) rather than its name,
// because rotation renames the active file to <path>.<N>: the rows
// already read there are not read again, and the ones another writer
// sharing the journal appended after the rename (for up to followEvery)
// are. A Read costs a stat per file plus the new bytes, however long the
// journal: the evidence pass runs it every interval on a journal that
// may be gigabytes.
//
// A final line without its newline is not delivered: the writer may be
// in the middle of it, and the next Read starts at it again. In a rotated
// file that did not grow since the previous Read it is a torn row: it is
// counted and passed. A Tail is not safe for concurrent use.
type Tail struct {
	path  string
	files map[fileID]*tailFile
	torn  Torn
	br    *bufio.Reader // reused for every file: a Read holds one buffer
	b     Brief
}

// fileID is a file's identity, stable across renames.
type fileID struct{ dev, ino uint64 }

// tailFile is how far a Tail has read one file of the set.
type tailFile struct {
	off  int64 // bytes consumed: always at a line's start
	line int   // lines consumed
	// heldSize is the file's size when a Read last stopped at a final
	// line without its newline; -1 when it did not.
	heldSize int64
}

// TailRead is what one Read did.
type TailRead struct {
	Files int   // files of the set listed
	Read  int   // files that had new bytes
	Bytes int64 // bytes consumed (whole lines only)
	Rows  int   // rows delivered
}

// NewTail reads the journal set at path from its beginning.
func NewTail(path string) *Tail {
	return &Tail{path: path, files: map[fileID]*tailFile{}}
}

// Torn is every torn row skipped so far.
func (t *Tail) Torn() Torn { return t.torn }

// Read calls fn for each whole row appended since the previous Read. A
// line that is whole JSON but not a journal row ends the Read with an
// error naming file and line, as does an error from fn; the next Read
// starts at that line again.
func (t *Tail) Read(fn func(*Brief) error) (TailRead, error) {
	names, err := SetFiles(t.path)
	if err != nil {
		return TailRead{}, err
	}
	res := TailRead{Files: len(names)}
	seen := make(map[fileID]bool, len(names))
	for _, name := range names {
		id, size, err := identify(name)
		if errors.Is(err, os.ErrNotExist) {
			continue // rotated or removed between the listing and now
		}
		if err != nil {
			return res, err
		}
		seen[id] = true
		st := t.files[id]
		if st == nil {
			st = &tailFile{heldSize: -1}
			t.files[id] = st
		}
		if size < st.off {
			*st = tailFile{heldSize: -1} // truncated or replaced: read it again
		}
		if size == st.off {
			continue
		}
		res.Read++
		if err := t.readFile(name, name != t.path, size, st, fn, &res); err != nil {
			return res, err
		}
	}
	for id := range t.files {
		if !seen[id] {
			delete(t.files, id) // gone from the set: an operator moved it away
		}
	}
	return res, nil
}

// identify stats name for its identity and size.
func identify(name string) (fileID, int64, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return fileID{}, 0, fmt.Errorf("read journal %s: %w", name, err)
	}
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, 0, fmt.Errorf("read journal %s: no device and inode on this platform", name)
	}
	return fileID{dev: uint64(sys.Dev), ino: sys.Ino}, fi.Size(), nil
}

// readFile delivers name's whole lines from st.off.
func (t *Tail) readFile(name string, rotated bool, size int64, st *tailFile, fn func(*Brief) error, res *TailRead) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("read journal %s: %w", name, err)
	}
	defer f.Close()
	if _, err := f.Seek(st.off, io.SeekStart); err != nil {
		return fmt.Errorf("read journal %s: %w", name, err)
	}
	if t.br == nil {
		t.br = bufio.NewReaderSize(f, 1<<20)
	} else {
		t.br.Reset(f)
	}
	for {
		raw, err := readLine(t.br)
		if errors.Is(err, io.EOF) {
			t.held(name, rotated, size, st, len(raw), res)
			return nil
		}
		if err != nil {
			return fmt.Errorf("read journal %s:%d: %w", name, st.line+1, err)
		}
		skip, err := t.b.fillLine(raw, name, st.line+1, &t.torn)
		if err == nil && !skip {
			err = fn(&t.b)
		}
		if err != nil {
			return err
		}
		st.off += int64(len(raw)) + 1
		st.line++
		res.Bytes += int64(len(raw)) + 1
		if !skip {
			res.Rows++
		}
	}
}

// held handles a file's end: n bytes after its last newline. In a
// rotated file that has not grown since the previous Read stopped there,
// they are a torn row, counted and passed; otherwise the next Read tries
// them again.
func (t *Tail) held(name string, rotated bool, size int64, st *tailFile, n int, res *TailRead) {
	if n == 0 {
		st.heldSize = -1
		return
	}
	if rotated && st.heldSize == size {
		t.torn.add(name, st.line+1)
		st.off, st.line, st.heldSize = size, st.line+1, -1
		res.Bytes += int64(n)
		return
	}
	st.heldSize = size
}

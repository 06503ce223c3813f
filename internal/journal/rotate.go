package journal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/narwhal-go/narwhal/internal/atomicfile"
)

// A rotated journal is a set of files: <path>.1, <path>.2, … (oldest
// first) and <path> itself, the one being written. Each file is a whole
// journal: it starts with a meta row, and a run that spans files repeats
// its run id and start time there with the next part number.
//
// Several writers may share one journal (a primary and its standby
// beside it, each its own run). Rotation is then serialised by an
// advisory lock on <path>.lock; under it a writer renames the active
// file aside only if it is still the file at <path> (else another writer
// rotated it: this one joins the new file), and the rename never
// replaces a file, so no rotated file is ever renamed over. A writer
// that did not rotate notices within followEvery that its file moved
// and joins the new one with a meta row of its own; until then its rows
// land in the just-rotated file, still in the set. Rotation never
// renames an older file again, so a reader that listed the set sees
// every row once.

// followEvery bounds how long a writer keeps appending to a file another
// writer sharing the journal rotated away.
const followEvery = 250 * time.Millisecond

// rotateLocked closes the full file, moves it aside and starts the next
// part with its own meta row. Called with mu held.
func (w *Writer) rotateLocked() error {
	if err := w.swapFileLocked(); err != nil {
		return err
	}
	return w.partLocked()
}

// partLocked starts the run's next part in the file just opened: a meta
// row with the next part number. Called with mu held.
func (w *Writer) partLocked() error {
	w.meta.Part++
	line, err := metaLine(w.meta)
	if err != nil {
		return fmt.Errorf("rotate journal %s: %w", w.path, err)
	}
	return w.writeLocked(line)
}

// swapFileLocked renames the active file to the next free <path>.<N>,
// unless another writer already did, and opens the file at path. Called
// with mu held.
func (w *Writer) swapFileLocked() error {
	if w.path == "" || w.closer == nil {
		return nil
	}
	unlock, err := lockSet(w.path)
	if err != nil {
		return err
	}
	defer unlock()
	moved, err := w.movedLocked()
	if err != nil {
		return err
	}
	if !moved {
		if err := renameAside(w.path); err != nil {
			return err
		}
	}
	return w.reopenLocked()
}

// followLocked joins the file at path when another writer rotated this
// one's away, checking at most every followEvery. Called with mu held.
func (w *Writer) followLocked() error {
	if w.path == "" || w.closer == nil {
		return nil
	}
	now := time.Now()
	if now.Sub(w.followed) < followEvery {
		return nil
	}
	w.followed = now
	moved, err := w.movedLocked()
	if err != nil || !moved {
		return err
	}
	if err := w.reopenLocked(); err != nil {
		return err
	}
	return w.partLocked()
}

// movedLocked says the writer's open file is no longer the one at path.
// Called with mu held.
func (w *Writer) movedLocked() (bool, error) {
	f, ok := w.closer.(*os.File)
	if !ok {
		return false, nil
	}
	mine, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("journal %s: %w", w.path, err)
	}
	cur, err := os.Stat(w.path)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil // renamed aside, its successor not created yet
	}
	if err != nil {
		return false, fmt.Errorf("journal %s: %w; check the directory's permissions", w.path, err)
	}
	return !os.SameFile(mine, cur), nil
}

// reopenLocked closes the writer's file and opens (or creates) the one
// at path. Called with mu held.
func (w *Writer) reopenLocked() error {
	if err := w.closer.Close(); err != nil {
		return fmt.Errorf("rotate journal %s: close: %w", w.path, err)
	}
	w.closer = nil
	f, size, err := openAppend(w.path)
	if err != nil {
		return fmt.Errorf("rotate journal %s: reopen: %w", w.path, err)
	}
	w.w, w.closer, w.fileBytes = f, f, size
	return nil
}

// renameAside renames path to the first free <path>.<N> after the set's
// last, never over an existing file. The caller holds the set's lock.
func renameAside(path string) error {
	files, err := SetFiles(path)
	if err != nil {
		return fmt.Errorf("rotate journal %s: %w", path, err)
	}
	next := 1
	if n := len(files) - 1; n > 0 {
		next = rotatedIndex(path, files[n-1]) + 1
	}
	for range 64 {
		aside := path + "." + strconv.Itoa(next)
		err := renameNoReplace(path, aside)
		if !errors.Is(err, fs.ErrExist) {
			if err != nil {
				return fmt.Errorf("rotate journal %s to %s: %w; check the directory's permissions", path, aside, err)
			}
			return nil
		}
		next++ // written by something outside the lock: take the next
	}
	return fmt.Errorf("rotate journal %s: 64 names after %s.%d are taken; move old rotated files away", path, path, next-64)
}

// renameNoReplace renames old to new, failing with fs.ErrExist when new
// exists. Where the kernel cannot rename without replacing, it checks
// first: the set's lock keeps other journal writers out of the gap.
func renameNoReplace(old, new string) error {
	err := unix.Renameat2(unix.AT_FDCWD, old, unix.AT_FDCWD, new, unix.RENAME_NOREPLACE)
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) {
		if errors.Is(err, unix.EEXIST) {
			return fs.ErrExist
		}
		return err
	}
	if _, err := os.Lstat(new); err == nil {
		return fs.ErrExist
	}
	return os.Rename(old, new)
}

// lockSet takes the advisory lock that serialises rotation among the
// writers sharing the journal at path, and returns its release.
func lockSet(path string) (func(), error) {
	unlock, err := atomicfile.Lock(path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("rotate journal %s: %w", path, err)
	}
	return unlock, nil
}

// rotatedIndex is N of <path>.<N>, 0 when name is not a rotated file of
// path.
func rotatedIndex(path, name string) int {
	rest, ok := strings.CutPrefix(name, path+".")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 1 || strconv.Itoa(n) != rest {
		return 0
	}
	return n
}

// SetFiles lists the files of the journal at path in row order: the
// rotated files <path>.<N> by N, then path itself when it exists. A path
// with neither is an error that says so.
func SetFiles(path string) ([]string, error) {
	matches, err := filepath.Glob(globEscape(path) + ".*")
	if err != nil {
		return nil, fmt.Errorf("list journal %s: %w", path, err)
	}
	var rotated []string
	for _, m := range matches {
		if rotatedIndex(path, m) > 0 {
			rotated = append(rotated, m)
		}
	}
	slices.SortFunc(rotated, func(a, b string) int { return rotatedIndex(path, a) - rotatedIndex(path, b) })
	if _, err := os.Stat(path); err == nil {
		rotated = append(rotated, path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read journal %s: %w", path, err)
	}
	if len(rotated) == 0 {
		return nil, fmt.Errorf("read journal %s: no such file, nor rotated files %s.1, …; check the path (narwhal-serve --journal)", path, path)
	}
	return rotated, nil
}

// SetBytes is the size of every file of the journal set at path.
func SetBytes(path string) (int64, error) {
	files, err := SetFiles(path)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			return 0, fmt.Errorf("read journal %s: %w", f, err)
		}
		n += fi.Size()
	}
	return n, nil
}

// globEscape quotes the glob metacharacters of a literal path.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// SetReader reads a rotated set as one journal: the files of SetFiles in
// order, each through a Reader, so errors name the file and line.
type SetReader struct {
	files []string
	cur   *os.File
	rd    *Reader
	torn  Torn // the finished files' torn rows
}

// OpenSet lists the set at path (see SetFiles) and opens its first file.
func OpenSet(path string) (*SetReader, error) {
	files, err := SetFiles(path)
	if err != nil {
		return nil, err
	}
	s := &SetReader{files: files}
	return s, s.advance()
}

// Files are the set's files in the order they are read.
func (s *SetReader) Files() []string { return slices.Clone(s.files) }

func (s *SetReader) advance() error {
	if s.rd != nil {
		s.torn.Merge(s.rd.Torn())
		s.rd = nil
	}
	if s.cur != nil {
		s.cur.Close()
		s.cur = nil
	}
	if len(s.files) == 0 {
		return io.EOF
	}
	name := s.files[0]
	s.files = s.files[1:]
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("read journal %s: %w", name, err)
	}
	s.cur, s.rd = f, NewReader(f)
	return nil
}

// Next returns the next record of the set, io.EOF after the last file's
// last row. Torn rows are skipped and counted (Torn); a file's other
// error (a truncated tail included) ends the iteration.
func (s *SetReader) Next() (Record, error) {
	for s.rd != nil {
		rec, err := s.rd.Next()
		if err == nil || !errors.Is(err, io.EOF) {
			return rec, err
		}
		if err := s.advance(); err != nil {
			return Record{}, err
		}
	}
	return Record{}, io.EOF
}

// Torn is what Next has skipped so far, over every file read.
func (s *SetReader) Torn() Torn {
	t := s.torn
	if s.rd != nil {
		t.Merge(s.rd.Torn())
	}
	return t
}

// Close closes the file being read.
func (s *SetReader) Close() error {
	s.files = nil
	if s.cur == nil {
		return nil
	}
	err := s.cur.Close()
	s.cur = nil
	return err
}

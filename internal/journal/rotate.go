package journal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A rotated journal is a set of files: <path>.1, <path>.2, … (oldest
// first) and <path> itself, the one being written. Each file is a whole
// journal: it starts with a meta row, and a run that spans files repeats
// its run id and start time there with the next part number. Rotation
// never renames an older file again, so a reader that listed the set
// sees every row once, whatever rotates meanwhile, except rows written
// after it opened the active file.

// rotateLocked closes the full file, moves it aside and starts the next
// part with its own meta row. Called with mu held.
func (w *Writer) rotateLocked() error {
	if err := w.swapFileLocked(); err != nil {
		return err
	}
	w.meta.Part++
	line, err := metaLine(w.meta)
	if err != nil {
		return fmt.Errorf("rotate journal %s: %w", w.path, err)
	}
	return w.writeLocked(line)
}

// swapFileLocked renames the active file to the next free <path>.<N> and
// opens a fresh file at path. Called with mu held.
func (w *Writer) swapFileLocked() error {
	if w.path == "" || w.closer == nil {
		return nil
	}
	files, err := SetFiles(w.path)
	if err != nil {
		return fmt.Errorf("rotate journal %s: %w", w.path, err)
	}
	next := len(files) // the rotated ones, plus 1
	if n := len(files) - 1; n > 0 {
		next = rotatedIndex(w.path, files[n-1]) + 1
	}
	if err := w.closer.Close(); err != nil {
		return fmt.Errorf("rotate journal %s: close: %w", w.path, err)
	}
	w.closer = nil
	aside := w.path + "." + strconv.Itoa(next)
	if err := os.Rename(w.path, aside); err != nil {
		return fmt.Errorf("rotate journal %s to %s: %w; check the directory's permissions", w.path, aside, err)
	}
	f, err := os.OpenFile(w.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("rotate journal %s: reopen: %w; check the directory's permissions", w.path, err)
	}
	w.w, w.closer, w.fileBytes = f, f, 0
	return nil
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
// last row. A file's error (a torn tail included) ends the iteration.
func (s *SetReader) Next() (Record, error) {
	for s.rd != nil {
		rec, err := s.rd.Next()
		if err == nil || !errors.Is(err, io.EOF) {
			return rec, err
		}
		s.rd = nil
		if err := s.advance(); err != nil {
			return Record{}, err
		}
	}
	return Record{}, io.EOF
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

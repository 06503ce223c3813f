package artifact

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// File names the readers look for.
const (
	SingleFile = "model.safetensors"
	IndexFile  = "model.safetensors.index.json"
)

// MaxHeaderBytes bounds the header length a file may claim, as the
// reference reader does (safetensors: N ≤ 100,000,000); a larger value is
// damage, not a checkpoint.
const MaxHeaderBytes = 100_000_000

// maxIndexBytes bounds model.safetensors.index.json (the largest public
// indexes are a few MB).
const maxIndexBytes = 256 << 20

// HeaderError is one malformed-input finding: the file (relative to the
// model directory), the tensor when one is at fault, and what is wrong.
// Error() is one line; callers exit 2 on it (bad input).
type HeaderError struct {
	File    string
	Tensor  string
	Problem string
}

func (e *HeaderError) Error() string {
	if e.Tensor != "" {
		return fmt.Sprintf("safetensors %s: tensor %q: %s", e.File, e.Tensor, e.Problem)
	}
	return fmt.Sprintf("safetensors %s: %s", e.File, e.Problem)
}

func herr(file, tensor, format string, a ...any) *HeaderError {
	return &HeaderError{File: file, Tensor: tensor, Problem: fmt.Sprintf(format, a...)}
}

// IsHeaderError reports whether err is (or wraps) a *HeaderError.
func IsHeaderError(err error) bool {
	var h *HeaderError
	return errors.As(err, &h)
}

// ReadHeaders reads every tensor header of the safetensors checkpoint in
// dir without reading any weight bytes. The file set is the one vLLM's
// default loader uses: with model.safetensors.index.json, exactly the
// shard files its weight_map names (every index entry must be in its
// shard and every shard tensor in the index); without one, every
// *.safetensors file at the top of dir. The index's total_size is a hint:
// a disagreement with the headers is a warning in Headers.Warnings, not an
// error. Any malformed input is a *HeaderError.
func ReadHeaders(dir string) (Headers, error) {
	idx, err := readIndex(dir)
	if err != nil {
		return Headers{}, err
	}
	var files []string
	if idx != nil {
		files = idx.files()
	} else if files, err = listSafetensors(dir); err != nil {
		return Headers{}, err
	}
	h := Headers{Files: files, Metadata: map[string]map[string]string{}}
	for _, f := range files {
		ts, meta, err := ReadFileHeader(filepath.Join(dir, filepath.FromSlash(f)), f)
		if err != nil {
			return Headers{}, err
		}
		h.Metadata[f] = meta
		h.Tensors = append(h.Tensors, ts...)
	}
	// Sorted by name, then file: a tensor stored twice is adjacent, and the
	// later file is the one reported.
	slices.SortFunc(h.Tensors, func(a, b Tensor) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.File, b.File)
	})
	for i := 1; i < len(h.Tensors); i++ {
		if a, b := h.Tensors[i-1], h.Tensors[i]; a.Name == b.Name {
			return Headers{}, herr(b.File, b.Name, "also stored in %s; a tensor must be in one file", a.File)
		}
	}
	if idx != nil {
		if err := idx.check(h.Tensors); err != nil {
			return Headers{}, err
		}
		h.IndexTotalSize = idx.totalSize
		if w := idx.sizeWarning(h.TotalBytes()); w != "" {
			h.Warnings = append(h.Warnings, w)
		}
	}
	return h, nil
}

// TotalBytes is the sum of every tensor's payload bytes.
func (h Headers) TotalBytes() int64 {
	var n int64
	for _, t := range h.Tensors {
		n += t.Bytes
	}
	return n
}

func listSafetensors(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, &HeaderError{File: dir, Problem: "cannot list the model directory: " + errText(err)}
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".safetensors") && e.Type()&fs.ModeDir == 0 {
			out = append(out, e.Name())
		}
	}
	if len(out) == 0 {
		return nil, &HeaderError{File: dir, Problem: "no " + IndexFile + " and no *.safetensors files; point --model-dir at a safetensors checkpoint"}
	}
	slices.Sort(out)
	return out, nil
}

func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// ReadFileHeader reads and validates the header of one safetensors file
// at path; name is how errors and Tensor.File refer to it. It reads the
// 8-byte length and the header only.
func ReadFileHeader(path, name string) ([]Tensor, map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, herr(name, "", "cannot open: %s", errText(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, herr(name, "", "cannot stat: %s", errText(err))
	}
	size := st.Size()
	var lenBuf [8]byte
	if size < 8 {
		return nil, nil, herr(name, "", "truncated: %d bytes, shorter than the 8-byte header length; re-download the file", size)
	}
	if _, err := io.ReadFull(f, lenBuf[:]); err != nil {
		return nil, nil, herr(name, "", "cannot read the header length: %s", errText(err))
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	switch {
	case n > MaxHeaderBytes:
		return nil, nil, herr(name, "", "header length %d exceeds the %d-byte limit; the file is damaged or not safetensors", n, MaxHeaderBytes)
	case int64(n) > size-8:
		return nil, nil, herr(name, "", "header length %d runs past the end of the file (%d bytes); the file is truncated, re-download it", n, size)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, nil, herr(name, "", "cannot read the header: %s", errText(err))
	}
	return parseHeader(buf, name, size-8-int64(n))
}

type rawTensor struct {
	name       string
	dtype      string
	shape      []int64
	begin, end int64
	haveDType  bool
	haveShape  bool
	haveOffs   bool
}

// parseHeader parses one header and validates its tensors against a data
// section of dataSize bytes.
func parseHeader(b []byte, file string, dataSize int64) ([]Tensor, map[string]string, error) {
	s := &scanner{b: b, slab: make([]int64, 0, len(b)/40+8)}
	if s.peek() != '{' {
		return nil, nil, herr(file, "", "header does not start with '{'; not a safetensors file")
	}
	// A tensor entry is about 90 bytes of header.
	raws := make([]rawTensor, 0, len(b)/80+1)
	names := make(map[string]bool, len(b)/80+1)
	dtypes := map[string]string{}
	meta := map[string]string{}
	keys := map[string]string{"dtype": "dtype", "shape": "shape", "data_offsets": "data_offsets"}
	err := s.members(nil, func(key string, at int) error {
		if names[key] {
			return s.dupAt(key, at)
		}
		names[key] = true
		if key == "__metadata__" {
			if s.peek() != '{' {
				return herr(file, "", "__metadata__ is not an object of strings")
			}
			return s.object(func(k string) error {
				if s.peek() != '"' {
					return herr(file, "", "__metadata__ value of %q is not a string", k)
				}
				v, err := s.str()
				meta[k] = v
				return err
			})
		}
		r, err := parseTensor(s, file, key, keys, dtypes)
		raws = append(raws, r)
		return err
	})
	if err == nil {
		err = s.end()
	}
	var he *HeaderError
	if errors.As(err, &he) {
		return nil, nil, he
	}
	if err != nil {
		return nil, nil, herr(file, "", "header is not valid JSON %s", err)
	}
	ts, err := validate(raws, file, dataSize)
	return ts, meta, err
}

func parseTensor(s *scanner, file, name string, keys, dtypes map[string]string) (rawTensor, error) {
	r := rawTensor{name: name}
	if s.peek() != '{' {
		return r, herr(file, name, "header entry is not an object with dtype, shape and data_offsets")
	}
	ints := func(what string) ([]int64, error) {
		if s.peek() != '[' {
			return nil, herr(file, name, "%s is not an array of non-negative integers", what)
		}
		out, err := s.uints()
		var se *syntaxError
		if errors.As(err, &se) {
			return nil, herr(file, name, "%s must hold non-negative integers (%s)", what, se.msg)
		}
		return out, err
	}
	var other []string // keys beyond the three, skipped
	err := s.members(keys, func(k string, at int) error {
		var err error
		switch k {
		case "dtype":
			if r.haveDType {
				return s.dupAt(k, at)
			}
			if s.peek() != '"' {
				return herr(file, name, "dtype is not a string")
			}
			r.dtype, err = s.interned(dtypes)
			r.haveDType = true
		case "shape":
			if r.haveShape {
				return s.dupAt(k, at)
			}
			r.haveShape = true
			r.shape, err = ints("shape")
		case "data_offsets":
			if r.haveOffs {
				return s.dupAt(k, at)
			}
			r.haveOffs = true
			var offs []int64
			if offs, err = ints("data_offsets"); err == nil && len(offs) != 2 {
				return herr(file, name, "data_offsets has %d values, want [begin, end]", len(offs))
			}
			if err == nil {
				r.begin, r.end = offs[0], offs[1]
			}
		default:
			if slices.Contains(other, k) {
				return s.dupAt(k, at)
			}
			other = append(other, k)
			err = s.skip(0)
		}
		return err
	})
	return r, err
}

// validate checks each tensor and the layout of the data section: every
// known dtype's shape × width equals its offsets, and the tensors cover the
// data section exactly, without overlap, gap or overrun, as the reference
// reader requires.
func validate(raws []rawTensor, file string, dataSize int64) ([]Tensor, error) {
	out := make([]Tensor, 0, len(raws))
	for _, r := range raws {
		switch {
		case !r.haveDType:
			return nil, herr(file, r.name, "no dtype")
		case !r.haveShape:
			return nil, herr(file, r.name, "no shape")
		case !r.haveOffs:
			return nil, herr(file, r.name, "no data_offsets")
		case r.end < r.begin:
			return nil, herr(file, r.name, "data_offsets [%d, %d] end before they begin", r.begin, r.end)
		case r.end > dataSize:
			return nil, herr(file, r.name, "data_offsets [%d, %d] run past the data section (%d bytes); the file is truncated or damaged", r.begin, r.end, dataSize)
		}
		d := DType(r.dtype)
		if want, st := SizeOf(d, r.shape); st == SizeOK && want != r.end-r.begin {
			return nil, herr(file, r.name, "shape %s × %s is %d bytes but data_offsets [%d, %d] hold %d", ShapeText(r.shape), d, want, r.begin, r.end, r.end-r.begin)
		} else if st == SizeNotByteAlign {
			return nil, herr(file, r.name, "shape %s × %s does not fill whole bytes", ShapeText(r.shape), d)
		} else if st == SizeBadShape {
			return nil, herr(file, r.name, "shape %s has more elements than any file can hold", ShapeText(r.shape))
		}
		out = append(out, Tensor{Name: r.name, DType: d, Shape: r.shape, Bytes: r.end - r.begin, File: file})
	}
	return out, checkLayout(raws, file, dataSize)
}

func checkLayout(raws []rawTensor, file string, dataSize int64) error {
	order := make([]*rawTensor, len(raws))
	for i := range raws {
		order[i] = &raws[i]
	}
	slices.SortFunc(order, func(a, b *rawTensor) int {
		if a.begin != b.begin {
			return cmp.Compare(a.begin, b.begin)
		}
		return cmp.Compare(a.end, b.end)
	})
	var pos int64
	prev := ""
	for _, r := range order {
		switch {
		case r.begin < pos:
			return herr(file, r.name, "data_offsets [%d, %d] overlap tensor %q (ends at %d)", r.begin, r.end, prev, pos)
		case r.begin > pos:
			return herr(file, r.name, "data_offsets begin at %d, leaving a %d-byte gap after %s; safetensors tensors must be contiguous", r.begin, r.begin-pos, quoteOr(prev, "the start of the data"))
		}
		pos, prev = r.end, r.name
	}
	if pos != dataSize {
		return herr(file, "", "the file holds %d data bytes but the tensors cover %d; the file is truncated or has trailing bytes", dataSize, pos)
	}
	return nil
}

func quoteOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return strconv.Quote(s)
}

// ShapeText writes a tensor shape for messages: "[4096, 14336]".
func ShapeText(shape []int64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// index is model.safetensors.index.json.
type index struct {
	weightMap map[string]string // tensor → shard file (relative, slash-separated)
	totalSize *int64
}

func (x *index) files() []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range x.weightMap {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

// check matches the index against the headers read (sorted by name),
// reporting the first disagreement in name order.
func (x *index) check(sorted []Tensor) error {
	var extra []Tensor
	for _, t := range sorted {
		want, ok := x.weightMap[t.Name]
		switch {
		case !ok:
			extra = append(extra, t)
		case want != t.File:
			return herr(t.File, t.Name, "%s places it in %s", IndexFile, want)
		}
	}
	if found := len(sorted) - len(extra); found != len(x.weightMap) {
		var missing []string
		for n := range x.weightMap {
			if _, ok := slices.BinarySearchFunc(sorted, n, func(t Tensor, n string) int { return strings.Compare(t.Name, n) }); !ok {
				missing = append(missing, n)
			}
		}
		slices.Sort(missing)
		return herr(x.weightMap[missing[0]], missing[0], "listed in %s but not in this shard (%d such tensors)", IndexFile, len(missing))
	}
	if len(extra) > 0 {
		return herr(extra[0].File, extra[0].Name, "in the shard but not in %s (%d such tensors)", IndexFile, len(extra))
	}
	return nil
}

func (x *index) sizeWarning(total int64) string {
	if x.totalSize == nil || *x.totalSize == total {
		return ""
	}
	return fmt.Sprintf("%s metadata.total_size is %d but the headers hold %d tensor bytes; total_size is a hint, the headers are used", IndexFile, *x.totalSize, total)
}

// readIndex returns nil, nil when dir has no index.
func readIndex(dir string) (*index, error) {
	b, err := readSmall(filepath.Join(dir, IndexFile), maxIndexBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, herr(IndexFile, "", "cannot read: %s", errText(err))
	}
	x := &index{}
	s := &scanner{b: b}
	haveMap := false
	err = s.object(func(k string) error {
		switch k {
		case "weight_map":
			haveMap = true
			x.weightMap = make(map[string]string, len(b)/70+1)
			shards := map[string]string{}
			return s.members(nil, func(tensor string, at int) error {
				if _, dup := x.weightMap[tensor]; dup {
					return s.dupAt(tensor, at)
				}
				f, err := s.interned(shards)
				x.weightMap[tensor] = f
				return err
			})
		case "metadata":
			if s.peek() != '{' {
				return s.skip(0)
			}
			return s.object(func(mk string) error {
				if mk != "total_size" {
					return s.skip(0)
				}
				at := s.i
				if n, err := s.uint(); err == nil {
					x.totalSize = &n
					return nil
				}
				s.i = at // a non-integer total_size is only a hint we cannot use
				return s.skip(0)
			})
		}
		return s.skip(0)
	})
	if err == nil {
		err = s.end()
	}
	if err != nil {
		return nil, herr(IndexFile, "", "not valid JSON %s", err)
	}
	if !haveMap || len(x.weightMap) == 0 {
		return nil, herr(IndexFile, "", "has no weight_map entries")
	}
	for _, f := range x.files() {
		if !cleanRel(f) {
			return nil, herr(IndexFile, "", "shard file %q is not a plain relative path inside the model directory", f)
		}
	}
	return x, nil
}

// cleanRel accepts a slash-separated relative path without "." or ".."
// elements.
func cleanRel(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || path.Clean(p) != p {
		return false
	}
	for _, e := range strings.Split(p, "/") {
		if e == ".." || e == "." {
			return false
		}
	}
	return true
}

// readSmall reads a whole file, refusing one larger than limit.
func readSmall(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

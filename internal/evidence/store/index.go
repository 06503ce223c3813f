package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/narwhal-go/narwhal/internal/atomicfile"
	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
)

// The subject index lets a reader find the records about one subject
// without decoding every record. It is a cache: the records directory
// stays the source of truth, and every answer is re-checked against the
// records it reads.
//
//	<root>/index/v1/<sha256 of the bytes>.seg   immutable segments
//
// A segment is the line "narwhal.evidence.index 1" and then one line per
// record, sorted by digest: the record digest and the 16-hex-digit term
// hashes of each of its subject pairs and its claim quantity. A segment is
// written once with atomicfile and never changed; its name is the SHA-256
// of its bytes, so a damaged segment is recognised and removed. PutRecord
// adds a one-record segment; segments of similar size are merged (an LSM
// tree in miniature) so a store keeps a few dozen segments at most.
//
// Every lookup lists the records directory and re-indexes any record no
// segment names: one written by a build without the index, or left by a
// crash between the record and its segment. A segment lost, damaged or
// removed by a concurrent merge therefore costs time, never an answer.
const (
	indexDir     = "index"
	indexVersion = "v1"
	segSuffix    = ".seg"
	segHeader    = "narwhal.evidence.index 1\n"
	// mergeFanout segments of one size level are merged into one.
	mergeFanout = 4
	termHexLen  = 16
)

// Term selects records by one subject value or by the claim quantity.
type Term struct {
	quantity   bool
	Key, Value string
}

// SubjectTerm selects the records whose subject[key] is value.
func SubjectTerm(key, value string) Term { return Term{Key: key, Value: value} }

// QuantityTerm selects the records whose claim quantity is q.
func QuantityTerm(q string) Term { return Term{quantity: true, Value: q} }

func (t Term) matches(r evidence.Record) bool {
	if t.quantity {
		return r.Claim.Quantity == t.Value
	}
	return r.Subject[t.Key] == t.Value
}

// hash is the term's index token. A collision only makes a lookup read
// a record it then drops, so 64 bits are plenty.
func (t Term) hash() string {
	kind := "s"
	if t.quantity {
		kind = "q"
	}
	sum := sha256.Sum256([]byte(kind + "\x00" + t.Key + "\x00" + t.Value))
	return hex.EncodeToString(sum[:termHexLen/2])
}

// termsOf is the index line tail of r: " h1 h2 …", sorted.
func termsOf(r evidence.Record) string {
	hs := []string{QuantityTerm(r.Claim.Quantity).hash()}
	for k, v := range r.Subject {
		hs = append(hs, SubjectTerm(k, v).hash())
	}
	sort.Strings(hs)
	return " " + strings.Join(hs, " ")
}

// Find returns the stored records matching any of terms, in digest order,
// reading only the records the index names. An empty subject value also
// matches records without that key, which the index cannot name, so such
// a term falls back to reading every record.
func (s *Store) Find(terms ...Term) ([]Stored, error) {
	for _, t := range terms {
		if t.Value == "" {
			return s.scan(terms)
		}
	}
	names, err := s.List()
	if err != nil {
		return nil, err
	}
	segs := s.readSegments()
	out, err := s.reindex(unindexed(names, segs), terms)
	if err != nil {
		return nil, err
	}
	for _, d := range hits(segs, terms) {
		if _, ok := slices.BinarySearch(names, d); !ok {
			continue // a segment may outlive a record removed by hand
		}
		r, _, err := s.Get(d)
		if err != nil {
			return nil, err
		}
		if anyMatch(terms, r) { // the index is a cache: the record decides
			out = append(out, Stored{Digest: d, Record: r})
		}
	}
	slices.SortFunc(out, func(a, b Stored) int { return strings.Compare(a.Digest, b.Digest) })
	return out, nil
}

// reindex reads the records no segment names, writes a segment for them
// and returns those matching terms.
func (s *Store) reindex(missing []string, terms []Term) ([]Stored, error) {
	var out []Stored
	tails := make(map[string]string, len(missing))
	for _, d := range missing {
		r, _, err := s.Get(d)
		if err != nil {
			return nil, err
		}
		tails[d] = termsOf(r)
		if anyMatch(terms, r) {
			out = append(out, Stored{Digest: d, Record: r})
		}
	}
	if len(missing) > 0 {
		// Best effort: a store we cannot write to still answers, only
		// more slowly next time.
		_ = s.addSegment(missing, tails)
	}
	return out, nil
}

// scan is Find without the index.
func (s *Store) scan(terms []Term) ([]Stored, error) {
	all, err := s.Records()
	if err != nil {
		return nil, err
	}
	var out []Stored
	for _, st := range all {
		if anyMatch(terms, st.Record) {
			out = append(out, st)
		}
	}
	return out, nil
}

func anyMatch(terms []Term, r evidence.Record) bool {
	for _, t := range terms {
		if t.matches(r) {
			return true
		}
	}
	return false
}

// seg is the body of a verified segment: lines "<digest>( <term hash>)*"
// ascending by digest.
type seg []byte

// hits returns the digests of segment lines carrying any term, sorted and
// unique. A token is " "+hash and every hash in a line is preceded by a
// space and exactly termHexLen long, so a substring hit is a term hit.
func hits(segs []seg, terms []Term) []string {
	set := map[string]bool{}
	for _, t := range terms {
		tok := []byte(" " + t.hash())
		for _, b := range segs {
			for off := 0; ; {
				i := bytes.Index(b[off:], tok)
				if i < 0 {
					break
				}
				at := off + i
				start := bytes.LastIndexByte(b[:at], '\n') + 1
				set[string(b[start:start+digestLen])] = true
				off = at + bytes.IndexByte(b[at:], '\n') + 1
			}
		}
	}
	out := make([]string, 0, len(set))
	for d := range set {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// unindexed returns the names (sorted) no segment names, walking every
// segment's sorted lines alongside the names without building a map.
func unindexed(names []string, segs []seg) []string {
	pos := make([]int, len(segs))
	var out []string
	for _, n := range names {
		found := false
		for i, b := range segs {
			for pos[i] < len(b) && string(b[pos[i]:pos[i]+digestLen]) < n {
				pos[i] += bytes.IndexByte(b[pos[i]:], '\n') + 1
			}
			if pos[i] < len(b) && string(b[pos[i]:pos[i]+digestLen]) == n {
				found = true
			}
		}
		if !found {
			out = append(out, n)
		}
	}
	return out
}

func (s *Store) segDir() string { return filepath.Join(s.Root, indexDir, indexVersion) }

// segment is one segment file on disk.
type segment struct {
	name string
	size int64
}

func (s *Store) segments() ([]segment, error) {
	ents, err := os.ReadDir(s.segDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []segment
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), segSuffix) || strings.HasPrefix(e.Name(), ".") || e.IsDir() {
			continue
		}
		if info, err := e.Info(); err == nil {
			out = append(out, segment{e.Name(), info.Size()})
		}
	}
	return out, nil
}

// readSegments returns every readable segment. A damaged one is
// removed; one that vanished (merged by another process) is skipped.
// Either way its records are re-indexed from the records themselves.
func (s *Store) readSegments() []seg {
	var out []seg
	files, _ := s.segments()
	for _, f := range files {
		p := filepath.Join(s.segDir(), f.name)
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		body, err := parseSegment(f.name, b)
		if err != nil {
			os.Remove(p)
			continue
		}
		out = append(out, body)
	}
	return out
}

// parseSegment checks b against its name and returns its body once every
// line is long enough to hold a digest. That is all safety needs: the
// name check catches damage, and a line out of order or not a digest can
// only make a lookup re-index or re-read a record, never miss one (a
// record counts as indexed only when a line equals its digest, and every
// hit is checked against the record itself).
func parseSegment(name string, b []byte) (seg, error) {
	if name != segName(b) {
		return nil, fmt.Errorf("index segment %s: bytes do not hash to the name", name)
	}
	body, ok := bytes.CutPrefix(b, []byte(segHeader))
	if !ok {
		return nil, fmt.Errorf("index segment %s: not a version 1 segment", name)
	}
	for rest := body; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < digestLen || string(rest[:len(canon.DigestPrefix)]) != canon.DigestPrefix {
			return nil, fmt.Errorf("index segment %s: malformed line", name)
		}
		rest = rest[i+1:]
	}
	return body, nil
}

// lines adds a segment body's lines to tails.
func lines(body seg, tails map[string]string) {
	for rest := []byte(body); len(rest) > 0; {
		line, after, _ := bytes.Cut(rest, []byte("\n"))
		tails[string(line[:digestLen])] = string(line[digestLen:])
		rest = after
	}
}

// digestLen is the length of a "1220…" record digest.
const digestLen = 68

// addSegment writes a segment of the given digests' tails and merges
// segments that have piled up.
func (s *Store) addSegment(digests []string, ix map[string]string) error {
	if _, err := s.writeSegment(digests, ix); err != nil {
		return err
	}
	return s.compact()
}

// writeSegment writes the segment of digests (their tails from ix) and
// returns its file name.
func (s *Store) writeSegment(digests []string, ix map[string]string) (string, error) {
	sort.Strings(digests)
	var buf bytes.Buffer
	buf.WriteString(segHeader)
	for i, d := range digests {
		if i > 0 && d == digests[i-1] {
			continue
		}
		buf.WriteString(d)
		buf.WriteString(ix[d])
		buf.WriteByte('\n')
	}
	if err := os.MkdirAll(s.segDir(), 0o755); err != nil {
		return "", fmt.Errorf("evidence index: %w", err)
	}
	name := segName(buf.Bytes())
	return name, atomicfile.Write(filepath.Join(s.segDir(), name), buf.Bytes(), 0o644)
}

// segName is a segment's file name: the SHA-256 of its bytes.
func segName(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]) + segSuffix
}

// indexRecord adds the segment for one newly stored record.
func (s *Store) indexRecord(digest string, r evidence.Record) error {
	return s.addSegment([]string{digest}, map[string]string{digest: termsOf(r)})
}

// level groups segments by size, a factor of mergeFanout per level, so a
// record is rewritten about once per level: O(log n) work per record.
func level(size int64) int {
	l := 0
	for n := size / 4096; n > 0; n /= mergeFanout {
		l++
	}
	return l
}

// compact merges mergeFanout segments of one level into one until no
// level has that many. The merged segment is durable before its inputs
// are removed, so a crash leaves duplicates (harmless), never a gap.
func (s *Store) compact() error {
	for {
		segs, err := s.segments()
		if err != nil {
			return err
		}
		group := fullLevel(segs)
		if group == nil {
			return nil
		}
		if err := s.merge(group); err != nil {
			return err
		}
	}
}

// fullLevel returns the segments of the lowest level holding at least
// mergeFanout of them, or nil.
func fullLevel(segs []segment) []segment {
	byLevel := map[int][]segment{}
	low := -1
	for _, sg := range segs {
		l := level(sg.size)
		byLevel[l] = append(byLevel[l], sg)
		if len(byLevel[l]) >= mergeFanout && (low < 0 || l < low) {
			low = l
		}
	}
	if low < 0 {
		return nil
	}
	return byLevel[low]
}

func (s *Store) merge(group []segment) error {
	ix := map[string]string{}
	for _, sg := range group {
		b, err := os.ReadFile(filepath.Join(s.segDir(), sg.name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("evidence index: %w", err)
		}
		if err != nil {
			continue // merged and removed by another process
		}
		body, err := parseSegment(sg.name, b)
		if err != nil {
			os.Remove(filepath.Join(s.segDir(), sg.name)) // its records are re-indexed on the next lookup
			continue
		}
		lines(body, ix)
	}
	digests := make([]string, 0, len(ix))
	for d := range ix {
		digests = append(digests, d)
	}
	merged, err := s.writeSegment(digests, ix)
	if err != nil {
		return err
	}
	for _, sg := range group {
		if sg.name == merged {
			continue // the merge reproduced an input (its others held nothing new)
		}
		if err := os.Remove(filepath.Join(s.segDir(), sg.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("evidence index: %w", err)
		}
	}
	return nil
}

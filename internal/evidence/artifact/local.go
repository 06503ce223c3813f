package artifact

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
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

	"github.com/narwhal-go/narwhal/internal/ports"
)

// HashMode says which files ObserveLocal may read to digest them.
type HashMode string

const (
	// HashSmall (the default) reads only small non-weight files (configs,
	// tokenizer, index); weight files take their SHA-256 from a sidecar
	// source or stay unresolved. Planning never reads weights.
	HashSmall HashMode = "small"
	// HashAll reads and hashes every file, checking each sidecar digest
	// against the bytes (slow on large checkpoints; explicit).
	HashAll HashMode = "all"
)

// SmallFileLimit is the largest file HashSmall reads (tokenizer.json of
// the largest vocabularies is about 35 MB).
const SmallFileLimit = 64 << 20

// SumsFile is an optional manifest in the model directory, in sha256sum's
// output format ("<64 hex>  <path>" or "<64 hex> *<path>" per line). It is
// itself a file of the narwhal.v1 set.
const SumsFile = "SHA256SUMS"

// DigestSource says where a file's SHA-256 came from.
type DigestSource string

const (
	DigestHashed     DigestSource = "hashed"            // read and hashed here
	DigestSums       DigestSource = "sha256sums"        // SHA256SUMS in the directory
	DigestHFBlob     DigestSource = "hf_cache_blob"     // HF cache: snapshots/<rev>/f → blobs/<sha256>
	DigestHFLocalDir DigestSource = "hf_local_dir_etag" // huggingface_hub local_dir download metadata
)

// weightExts are files HashSmall never reads, whatever their size.
var weightExts = []string{".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".h5", ".msgpack", ".onnx", ".npz"}

// FileOrigin records how one file's digest was obtained.
type FileOrigin struct {
	Path   string       `json:"path"`
	Source DigestSource `json:"source"`
}

// LocalObservation is the resolution of a local model directory. When
// every file of the narwhal.v1 set has a SHA-256, Observation and
// Identity are set; otherwise both are nil, Unresolved lists the files
// without one and Reason says how to resolve them. A digest is never
// invented.
type LocalObservation struct {
	Locator     Locator
	Observation *SourceObservation
	Identity    *Identity
	// Files are the digests that did resolve, sorted by path, also when
	// others did not (the tokenizer digest needs only small files).
	Files      []FileDigest
	Origins    []FileOrigin // sorted by path
	Unresolved []string     // sorted
	Reason     string
	// HFRevision is the commit of a Hugging Face cache snapshot directory
	// (…/snapshots/<40 hex>), recorded as an attributed claim; local
	// identity stays content-derived.
	HFRevision string
}

// ObserveLocal resolves the model directory dir. Errors are for input
// that is wrong (a malformed SHA256SUMS, a sidecar digest that disagrees
// with the bytes, unreadable files), not for missing digests.
func ObserveLocal(dir string, mode HashMode, clock ports.Clock) (LocalObservation, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return LocalObservation{}, err
	}
	out := LocalObservation{Locator: Locator{SchemaVersion: LocatorSchemaVersion, SourceKind: SourceLocal, URI: filepath.ToSlash(abs)}}
	if mode != HashSmall && mode != HashAll {
		return out, fmt.Errorf("hash mode %q: want %q or %q", mode, HashSmall, HashAll)
	}
	paths, unresolved, err := listFiles(abs)
	if err != nil {
		return out, err
	}
	sums, err := readSums(abs)
	if err != nil {
		return out, err
	}
	var files []FileDigest
	for _, p := range paths {
		fd, src, ok, err := digestFile(abs, p, mode, sums[p])
		if err != nil {
			return out, err
		}
		if !ok {
			unresolved = append(unresolved, p)
			continue
		}
		files = append(files, fd)
		out.Origins = append(out.Origins, FileOrigin{Path: p, Source: src})
	}
	out.HFRevision = hfSnapshotRevision(abs)
	out.Files = sortedFiles(files)
	slices.Sort(unresolved)
	if len(unresolved) > 0 {
		out.Unresolved = unresolved
		out.Reason = unresolvedReason(unresolved)
		return out, nil
	}
	return out, out.resolve(files, clock)
}

func (o *LocalObservation) resolve(files []FileDigest, clock ports.Clock) error {
	id, err := IdentityV1(files)
	if err != nil {
		o.Reason = err.Error()
		return nil
	}
	m, err := ManifestDigest(files)
	if err != nil {
		return err
	}
	at := clock.Now().UTC().Format(time.RFC3339Nano)
	obs := &SourceObservation{
		SchemaVersion: ObservationSchemaVersion, SourceKind: SourceLocal,
		ResolvedRevision: "content:" + id.ContentDigest, ManifestDigest: &m,
		Files: sortedFiles(files), PublisherClaims: []AttributedClaim{}, ObservedAt: at,
	}
	if o.HFRevision != "" {
		obs.PublisherClaims = append(obs.PublisherClaims, AttributedClaim{Claim: "hf_snapshot_revision", Value: o.HFRevision, Source: "hf_cache_path", ObservedAt: at})
	}
	o.Observation, o.Identity = obs, &id
	return nil
}

func unresolvedReason(files []string) string {
	shown := files
	if len(shown) > 3 {
		shown = shown[:3]
	}
	more := ""
	if len(files) > 3 {
		more = fmt.Sprintf(" and %d more", len(files)-3)
	}
	return fmt.Sprintf("artifact identity unresolved: %d files have no SHA-256 without reading them (%s%s); add a %s manifest, use a Hugging Face cache snapshot, or hash every file",
		len(files), strings.Join(shown, ", "), more, SumsFile)
}

// listFiles walks dir for the narwhal.v1 set: regular files and symlinks
// to regular files. A symlink to a directory is not followed and is
// reported unresolved (following it could loop or leave the directory).
func listFiles(dir string) (files, unresolved []string, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == ".cache/huggingface" {
				return filepath.SkipDir
			}
			return nil
		}
		if !IncludedV1(rel) {
			return nil
		}
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("model directory: %s: %s", rel, errText(err))
		}
		switch {
		case st.Mode().IsRegular():
			files = append(files, rel)
		case st.IsDir():
			unresolved = append(unresolved, rel+"/ (symlinked directory, not followed)")
		}
		return nil
	})
	return files, unresolved, err
}

// sidecar is a digest known without reading the file.
type sidecar struct {
	sha string
	src DigestSource
}

func digestFile(dir, rel string, mode HashMode, sum string) (FileDigest, DigestSource, bool, error) {
	full := filepath.Join(dir, filepath.FromSlash(rel))
	st, err := os.Stat(full)
	if err != nil {
		return FileDigest{}, "", false, fmt.Errorf("model directory: %s: %s", rel, errText(err))
	}
	var side *sidecar
	if sum != "" {
		side = &sidecar{sum, DigestSums}
	} else if sha := hfBlobDigest(full); sha != "" {
		side = &sidecar{sha, DigestHFBlob}
	} else if sha := hfLocalDirDigest(dir, rel, st.ModTime()); sha != "" {
		side = &sidecar{sha, DigestHFLocalDir}
	}
	fd := FileDigest{Path: rel, SizeBytes: st.Size()}
	if mode == HashSmall && (isWeightFile(rel) || st.Size() > SmallFileLimit) {
		if side == nil {
			return fd, "", false, nil
		}
		fd.SHA256 = side.sha
		return fd, side.src, true, nil
	}
	sha, err := hashFile(full)
	if err != nil {
		return fd, "", false, fmt.Errorf("model directory: %s: %s", rel, errText(err))
	}
	if side != nil && side.sha != sha {
		return fd, "", false, fmt.Errorf("model directory: %s: SHA-256 of the bytes is %s but %s says %s; the file is damaged or the manifest is stale, re-download it", rel, sha, side.src, side.sha)
	}
	fd.SHA256 = sha
	return fd, DigestHashed, true, nil
}

func isWeightFile(p string) bool {
	return slices.Contains(weightExts, strings.ToLower(filepath.Ext(p)))
}

func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// readSums parses dir/SHA256SUMS into path → sha256 (empty when absent).
func readSums(dir string) (map[string]string, error) {
	b, err := readSmall(filepath.Join(dir, SumsFile), maxIndexBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s", SumsFile, errText(err))
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		sha, rest, ok := strings.Cut(line, " ")
		if !ok || !isSHA256(strings.ToLower(sha)) || len(rest) < 2 || (rest[0] != ' ' && rest[0] != '*') {
			return nil, fmt.Errorf("%s line %d: want \"<64 hex>  <path>\" as sha256sum writes it", SumsFile, n)
		}
		p := strings.TrimPrefix(rest[1:], "./")
		if !cleanRel(p) {
			return nil, fmt.Errorf("%s line %d: path %q is not a clean relative path", SumsFile, n, rest[1:])
		}
		if prev, dup := out[p]; dup && prev != strings.ToLower(sha) {
			return nil, fmt.Errorf("%s line %d: %s listed twice with different digests", SumsFile, n, p)
		}
		out[p] = strings.ToLower(sha)
	}
	return out, sc.Err()
}

// hfBlobDigest reads the SHA-256 of a Hugging Face cache file: in
// <cache>/models--org--name/snapshots/<rev>/<file> each file is a symlink
// to ../../blobs/<name>, and for LFS files the blob name is the LFS
// object id, the SHA-256 of the content (small non-LFS files are named by
// their git SHA-1, 40 hex, and are hashed instead).
func hfBlobDigest(full string) string {
	target, err := os.Readlink(full)
	if err != nil {
		return ""
	}
	base := filepath.Base(target)
	if filepath.Base(filepath.Dir(target)) != "blobs" || !isSHA256(base) {
		return ""
	}
	return base
}

// hfSnapshotRevision returns <rev> when dir is …/snapshots/<40 hex>.
func hfSnapshotRevision(dir string) string {
	rev := filepath.Base(dir)
	if filepath.Base(filepath.Dir(dir)) == "snapshots" && len(rev) == 40 && isLowerHex(rev) {
		return rev
	}
	return ""
}

// hfLocalDirDigest reads huggingface_hub's local_dir download metadata,
// .cache/huggingface/download/<file>.metadata: three lines, commit hash,
// etag, download timestamp. For LFS files the etag is the SHA-256. The
// entry is trusted only while the file is not newer than the download,
// the rule huggingface_hub itself applies.
func hfLocalDirDigest(dir, rel string, mtime time.Time) string {
	b, err := readSmall(filepath.Join(dir, ".cache", "huggingface", "download", filepath.FromSlash(rel)+".metadata"), 4096)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 3 {
		return ""
	}
	etag := strings.Trim(strings.TrimSpace(lines[1]), `"`)
	ts, err := strconv.ParseFloat(strings.TrimSpace(lines[2]), 64)
	if err != nil || !isSHA256(etag) {
		return ""
	}
	if float64(mtime.UnixNano())/1e9-1 > ts {
		return "" // modified after download: the etag no longer describes it
	}
	return etag
}

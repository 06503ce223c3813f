package canon

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite canonical and digest fields of testdata/vectors/records.json")

const vectorsPath = "testdata/vectors/records.json"

type vectorFile struct {
	Schema        string   `json:"schema"`
	SchemaVersion int      `json:"schema_version"`
	Description   string   `json:"description"`
	License       string   `json:"license"`
	Vectors       []vector `json:"vectors"`
}

type vector struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Input       string `json:"input,omitempty"`
	InputHex    string `json:"input_hex,omitempty"`
	Canonical   string `json:"canonical,omitempty"`
	Digest      string `json:"digest,omitempty"`
	Error       Code   `json:"error,omitempty"`
}

// TestVectors checks our published vectors: each input canonicalizes to
// the recorded text and digest, each rejection is refused with its code.
// scripts/vectors-check.mjs checks the same file with an independent
// JavaScript implementation.
func TestVectors(t *testing.T) {
	var f vectorFile
	if err := json.Unmarshal(mustRead(t, vectorsPath), &f); err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for i := range f.Vectors {
		v := &f.Vectors[i]
		if v.InputHex != "" {
			checkRejection(t, v)
			continue
		}
		accepted++
		got, err := Canonicalize([]byte(v.Input))
		if err != nil {
			t.Errorf("%s: %v", v.Name, err)
			continue
		}
		if *update {
			v.Canonical, v.Digest = string(got), Digest(got)
		}
		if string(got) != v.Canonical || Digest(got) != v.Digest {
			t.Errorf("%s: got %s %s\nwant %s %s", v.Name, got, Digest(got), v.Canonical, v.Digest)
		}
		if err := VerifyCanonical([]byte(v.Canonical)); err != nil {
			t.Errorf("%s: canonical text refused: %v", v.Name, err)
		}
	}
	if accepted < 25 {
		t.Errorf("only %d accepted vectors; the issue asks for at least 25", accepted)
	}
	if *update {
		writeVectors(t, &f)
	}
}

func checkRejection(t *testing.T, v *vector) {
	in, err := hex.DecodeString(v.InputHex)
	if err != nil {
		t.Fatalf("%s: %v", v.Name, err)
	}
	if _, err := Canonicalize(in); CodeOf(err) != v.Error {
		t.Errorf("%s: err %v, want code %s", v.Name, err, v.Error)
	}
}

func writeVectors(t *testing.T, f *vectorFile) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vectorsPath, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

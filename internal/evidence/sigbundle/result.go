package sigbundle

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore-go/pkg/verify"
)

type tlogEntry = tlog.Entry

// result turns sigstore-go's verification result into narwhal's document.
func result(res *verify.VerificationResult, b *bundle.Bundle, in Input) (Result, error) {
	out := Result{Verified: true, Content: "dsse", Timestamps: []Timestamp{}}
	if in.Artifact != nil {
		sum := sha256.Sum256(in.Artifact)
		out.Digest = "1220" + hex.EncodeToString(sum[:])
	} else {
		out.Digest = in.Digest.Algorithm + ":" + hex.EncodeToString(in.Digest.Value)
	}
	if c := res.Signature.Certificate; c != nil {
		out.Identity, out.Issuer = c.SubjectAlternativeName, c.Extensions.Issuer
	}
	if in.Key != nil {
		out.Key = keyID(in.Key)
	}
	if b.GetMessageSignature() != nil {
		out.Content = "message_signature"
	}
	out.BundleVersion, _ = b.Version()
	entries, _ := b.TlogEntries()
	if len(entries) > 0 {
		out.Log = "rekor_v1"
		if entries[0].IsRekorV2() {
			out.Log = "rekor_v2"
		}
	}
	for _, ts := range res.VerifiedTimestamps {
		t := Timestamp{Source: "tsa", URI: ts.URI, Time: ts.Timestamp.UTC().Format(time.RFC3339)}
		if ts.Type == "Tlog" {
			t.Source = "tlog"
		}
		out.Timestamps = append(out.Timestamps, t)
	}
	if len(out.Timestamps) > 0 {
		first := out.Timestamps[0]
		out.SignedAt, out.TimeSource = first.Time, first.Source+":"+first.URI
		if first.Source == "tlog" {
			out.TimeSource = "tlog:" + logIndex(entries)
		}
	}
	return out, nil
}

// logIndex is the index of the first entry whose promise gave a time.
func logIndex(entries []*tlog.Entry) string {
	for _, e := range entries {
		if e.HasInclusionPromise() {
			return strconv.FormatInt(e.LogIndex(), 10)
		}
	}
	return "?"
}

package sign

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
)

// rekorBody is the part of a hashedrekord or dsse v0.0.1 entry that ties
// the log entry to one signature.
type rekorBody struct {
	Kind string `json:"kind"`
	Spec struct {
		Data struct {
			Hash struct {
				Value string `json:"value"`
			} `json:"hash"`
		} `json:"data"`
		Signature struct {
			Content string `json:"content"`
		} `json:"signature"`
		PayloadHash struct {
			Value string `json:"value"`
		} `json:"payloadHash"`
		Signatures []struct {
			Signature string `json:"signature"`
		} `json:"signatures"`
	} `json:"spec"`
}

// bindTlog refuses a log entry that records some other signature: a valid
// timestamp for another artifact must not lend its time to this one.
func bindTlog(b Bundle) error {
	for i, e := range b.VerificationMaterial.TlogEntries {
		raw, err := base64.StdEncoding.DecodeString(e.CanonicalizedBody)
		var body rekorBody
		if err == nil {
			err = json.Unmarshal(raw, &body)
		}
		if err != nil {
			return refuse(ReasonUntrusted, "tlogEntries[%d]: canonicalizedBody is not a Rekor entry: %v", i, err)
		}
		if !bodyMatches(body, b) {
			return refuse(ReasonUntrusted, "tlogEntries[%d]: the %s log entry records a different signature than this bundle", i, body.Kind)
		}
	}
	return nil
}

func bodyMatches(body rekorBody, b Bundle) bool {
	switch {
	case body.Kind == "hashedrekord" && b.MessageSignature != nil:
		d, _ := base64.StdEncoding.DecodeString(b.MessageSignature.MessageDigest.Digest)
		return body.Spec.Data.Hash.Value == hex.EncodeToString(d) && body.Spec.Signature.Content == b.MessageSignature.Signature
	case body.Kind == "dsse" && b.DSSEEnvelope != nil:
		p, _ := base64.StdEncoding.DecodeString(b.DSSEEnvelope.Payload)
		sum := sha256.Sum256(p)
		sigs := body.Spec.Signatures
		return body.Spec.PayloadHash.Value == hex.EncodeToString(sum[:]) && len(sigs) == 1 && sigs[0].Signature == b.DSSEEnvelope.Signatures[0].Sig
	}
	return false
}

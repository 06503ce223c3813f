// Package sign signs and verifies narwhal evidence (ADR-006 signing,
// reference §2.17, §3.6): in-toto Statement v1 payloads whose subjects are
// record or release-manifest digests, wrapped in DSSE envelopes signed
// with Ed25519. Sigstore bundles are verified by package sigbundle, with
// sigstore-go.
//
// Signatures never enter a record: they live beside it, so signing never
// changes record identity. The package is deterministic (INV-42): key
// generation takes its entropy as an io.Reader.
package sign

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
)

// PayloadType is the DSSE payload type of an in-toto Statement.
const PayloadType = "application/vnd.in-toto+json"

// Envelope is a DSSE envelope (reference §3.6.2).
type Envelope struct {
	PayloadType string      `json:"payloadType"`
	Payload     string      `json:"payload"` // standard base64
	Signatures  []Signature `json:"signatures"`
}

// Signature is one DSSE signature; KeyID names the signing key so a
// verifier can tell "wrong key" from "altered payload".
type Signature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"` // standard base64
}

// PAE is DSSE's pre-authentication encoding: the exact bytes a signature
// covers, so a payload cannot be reinterpreted under another type.
func PAE(payloadType string, payload []byte) []byte {
	b := []byte("DSSEv1 ")
	b = strconv.AppendInt(b, int64(len(payloadType)), 10)
	b = append(b, ' ')
	b = append(b, payloadType...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(payload)), 10)
	b = append(b, ' ')
	return append(b, payload...)
}

// SignPayload wraps payload in an envelope signed by key.
func SignPayload(key Key, payloadType string, payload []byte) Envelope {
	sig := ed25519.Sign(key.Private, PAE(payloadType, payload))
	return Envelope{
		PayloadType: payloadType,
		Payload:     base64.StdEncoding.EncodeToString(payload),
		Signatures:  []Signature{{KeyID: key.Public.ID(), Sig: base64.StdEncoding.EncodeToString(sig)}},
	}
}

// ParseEnvelope decodes an envelope strictly enough that a malformed one is
// bad input rather than a failed verification.
func ParseEnvelope(b []byte) (Envelope, []byte, error) {
	var e Envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return Envelope{}, nil, fmt.Errorf("envelope: %w", err)
	}
	if e.PayloadType == "" {
		return Envelope{}, nil, fmt.Errorf("envelope: payloadType is missing")
	}
	if len(e.Signatures) == 0 {
		return Envelope{}, nil, fmt.Errorf("envelope: signatures is empty; sign it with `narwhal evidence sign`")
	}
	payload, err := base64.StdEncoding.DecodeString(e.Payload)
	if err != nil {
		return Envelope{}, nil, fmt.Errorf("envelope: payload is not base64: %w", err)
	}
	return e, payload, nil
}

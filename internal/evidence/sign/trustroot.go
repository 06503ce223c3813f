package sign

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// TrustedRoot is the part of a Sigstore trusted_root.json
// (application/vnd.dev.sigstore.trustedroot+json) this verifier reads:
// Fulcio certificate authorities and Rekor log keys. CT logs and
// timestamp authorities are parsed by Sigstore's own verifier only.
type TrustedRoot struct {
	MediaType              string                 `json:"mediaType"`
	Tlogs                  []TransparencyLog      `json:"tlogs"`
	CertificateAuthorities []CertificateAuthority `json:"certificateAuthorities"`
}

// TransparencyLog is a Rekor instance's public key.
type TransparencyLog struct {
	BaseURL   string  `json:"baseUrl"`
	PublicKey KeyData `json:"publicKey"`
	LogID     LogID   `json:"logId"`
}

// KeyData is a DER public key with its validity window.
type KeyData struct {
	RawBytes   string   `json:"rawBytes"`
	KeyDetails string   `json:"keyDetails"`
	ValidFor   Validity `json:"validFor"`
}

// LogID is base64 of the SHA-256 of the log's DER public key.
type LogID struct {
	KeyID string `json:"keyId"`
}

// CertificateAuthority is a Fulcio instance's certificate chain, leaf CA
// first and root last.
type CertificateAuthority struct {
	URI       string    `json:"uri"`
	CertChain CertChain `json:"certChain"`
	ValidFor  Validity  `json:"validFor"`
}

// CertChain is a list of DER certificates.
type CertChain struct {
	Certificates []RawBytes `json:"certificates"`
}

// RawBytes is base64 DER.
type RawBytes struct {
	RawBytes string `json:"rawBytes"`
}

// Validity is an RFC 3339 window; an empty End is open.
type Validity struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// covers reports whether t is inside the window.
func (v Validity) covers(t time.Time) bool {
	if s, err := time.Parse(time.RFC3339, v.Start); err == nil && t.Before(s) {
		return false
	}
	if e, err := time.Parse(time.RFC3339, v.End); err == nil && t.After(e) {
		return false
	}
	return true
}

// ParseTrustedRoot decodes a trusted_root.json.
func ParseTrustedRoot(b []byte) (TrustedRoot, error) {
	var tr TrustedRoot
	if err := json.Unmarshal(b, &tr); err != nil {
		return TrustedRoot{}, fmt.Errorf("trusted root: %w", err)
	}
	if !strings.HasPrefix(tr.MediaType, "application/vnd.dev.sigstore.trustedroot") {
		return TrustedRoot{}, fmt.Errorf("trusted root: mediaType %q: want application/vnd.dev.sigstore.trustedroot+json;version=0.1", tr.MediaType)
	}
	if len(tr.CertificateAuthorities) == 0 {
		return TrustedRoot{}, fmt.Errorf("trusted root: no certificateAuthorities; keyless bundles need a Fulcio chain")
	}
	return tr, nil
}

// pools splits the CAs valid at t into roots (self-signed) and
// intermediates.
func (tr TrustedRoot) pools(t time.Time) (roots, inter *x509.CertPool, err error) {
	roots, inter = x509.NewCertPool(), x509.NewCertPool()
	for i, ca := range tr.CertificateAuthorities {
		if !ca.ValidFor.covers(t) {
			continue
		}
		for j, rb := range ca.CertChain.Certificates {
			c, err := parseCert(rb.RawBytes)
			if err != nil {
				return nil, nil, fmt.Errorf("trusted root: certificateAuthorities[%d].certChain[%d]: %w", i, j, err)
			}
			if j == len(ca.CertChain.Certificates)-1 {
				roots.AddCert(c)
			} else {
				inter.AddCert(c)
			}
		}
	}
	return roots, inter, nil
}

// tlog finds the log whose id is keyID (base64).
func (tr TrustedRoot) tlog(keyID string) (TransparencyLog, bool) {
	for _, l := range tr.Tlogs {
		if l.LogID.KeyID == keyID {
			return l, true
		}
		if der, err := base64.StdEncoding.DecodeString(l.PublicKey.RawBytes); err == nil && l.LogID.KeyID == "" {
			sum := sha256.Sum256(der)
			if base64.StdEncoding.EncodeToString(sum[:]) == keyID {
				return l, true
			}
		}
	}
	return TransparencyLog{}, false
}

func parseCert(b64 string) (*x509.Certificate, error) {
	der, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("certificate is not base64: %w", err)
	}
	return x509.ParseCertificate(der)
}

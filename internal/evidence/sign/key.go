package sign

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
)

// PublicKey is an Ed25519 verification key.
type PublicKey struct{ Key ed25519.PublicKey }

// Key is an Ed25519 signing key and its public half.
type Key struct {
	Private ed25519.PrivateKey
	Public  PublicKey
}

// GenerateKey makes a key from entropy; the caller passes crypto/rand's
// Reader (the package itself draws no randomness, INV-42).
func GenerateKey(entropy io.Reader) (Key, error) {
	pub, priv, err := ed25519.GenerateKey(entropy)
	if err != nil {
		return Key{}, fmt.Errorf("generate ed25519 key: %w", err)
	}
	return Key{Private: priv, Public: PublicKey{Key: pub}}, nil
}

// ID is the key id written into signatures: hex SHA-256 of the PKIX DER
// public key, which any implementation can recompute from the .pub file.
func (p PublicKey) ID() string {
	der, err := x509.MarshalPKIXPublicKey(p.Key)
	if err != nil { // an ed25519.PublicKey always marshals
		panic(err)
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// PEM is the public key as a PKIX "PUBLIC KEY" block (PREFIX.pub).
func (p PublicKey) PEM() []byte {
	der, err := x509.MarshalPKIXPublicKey(p.Key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// PEM is the private key as a PKCS #8 "PRIVATE KEY" block (PREFIX).
func (k Key) PEM() []byte {
	der, err := x509.MarshalPKCS8PrivateKey(k.Private)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// pemDER returns the DER of b's first PEM block, which must be of typ.
func pemDER(b []byte, typ, hint string) ([]byte, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != typ {
		return nil, fmt.Errorf("not a PEM %q block; %s", typ, hint)
	}
	return blk.Bytes, nil
}

// ParsePrivateKey reads a PKCS #8 Ed25519 private key PEM.
func ParsePrivateKey(b []byte) (Key, error) {
	der, err := pemDER(b, "PRIVATE KEY", "make one with `narwhal evidence keygen`")
	if err != nil {
		return Key{}, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	priv, ok := k.(ed25519.PrivateKey)
	if err != nil || !ok {
		return Key{}, fmt.Errorf("private key is not a PKCS #8 Ed25519 key (%T, %v)", k, err)
	}
	return Key{Private: priv, Public: PublicKey{Key: priv.Public().(ed25519.PublicKey)}}, nil
}

// ParsePublicKey reads a PKIX Ed25519 public key PEM.
func ParsePublicKey(b []byte) (PublicKey, error) {
	der, err := pemDER(b, "PUBLIC KEY", "pass the PREFIX.pub file `narwhal evidence keygen` wrote")
	if err != nil {
		return PublicKey{}, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	pub, ok := k.(ed25519.PublicKey)
	if err != nil || !ok {
		return PublicKey{}, fmt.Errorf("public key is not a PKIX Ed25519 key (%T, %v)", k, err)
	}
	return PublicKey{Key: pub}, nil
}

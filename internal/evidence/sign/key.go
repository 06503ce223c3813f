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

// ParsePrivateKey reads a PKCS #8 Ed25519 private key PEM.
func ParsePrivateKey(b []byte) (Key, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return Key{}, fmt.Errorf("not a PEM \"PRIVATE KEY\" block; make one with `narwhal evidence keygen`")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return Key{}, fmt.Errorf("private key: %w", err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return Key{}, fmt.Errorf("private key is %T, want Ed25519", k)
	}
	return Key{Private: priv, Public: PublicKey{Key: priv.Public().(ed25519.PublicKey)}}, nil
}

// ParsePublicKey reads a PKIX Ed25519 public key PEM.
func ParsePublicKey(b []byte) (PublicKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return PublicKey{}, fmt.Errorf("not a PEM \"PUBLIC KEY\" block; pass the PREFIX.pub file `narwhal evidence keygen` wrote")
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return PublicKey{}, fmt.Errorf("public key: %w", err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return PublicKey{}, fmt.Errorf("public key is %T, want Ed25519", k)
	}
	return PublicKey{Key: pub}, nil
}

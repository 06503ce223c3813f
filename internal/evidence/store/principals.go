package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/narwhal-go/narwhal/internal/atomicfile"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/sign"
)

// An acceptance means something only when the principal it names signed
// it (reference/evidence.md §2.14: a principal is who may accept). The
// store keeps the operator's registry of each principal's public keys
// (principal-keys.json, written by `narwhal evidence keys add`) and a DSSE
// envelope per signed record (signatures/<digest>.dsse.json, written by
// `narwhal evidence accept --key`). Records() verifies each envelope
// against the keys registered for the principal the record names, and
// says who signed it in Stored.SignedBy: decision.ValidAcceptance counts
// an acceptance only when that is its own principal.

// Principal-keys document.
const (
	PrincipalKeysFile          = "principal-keys.json"
	PrincipalKeysSchema        = "narwhal.principal-keys"
	PrincipalKeysSchemaVersion = 1
	signaturesDir              = "signatures"
)

// PrincipalKeys is the registry: each principal's public keys, PEM.
type PrincipalKeys struct {
	Schema        string              `json:"schema"`
	SchemaVersion int                 `json:"schema_version"`
	Principals    map[string][]string `json:"principals"`
}

// PrincipalKeys reads the registry; a store without one has none.
func (s *Store) PrincipalKeys() (PrincipalKeys, error) {
	out := PrincipalKeys{Schema: PrincipalKeysSchema, SchemaVersion: PrincipalKeysSchemaVersion, Principals: map[string][]string{}}
	b, err := s.readRootFile(PrincipalKeysFile)
	if err != nil || b == nil {
		return out, err
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Schema != PrincipalKeysSchema || out.SchemaVersion != PrincipalKeysSchemaVersion {
		return out, fmt.Errorf("evidence store %s: not a %s v%d document (%v); fix or remove it and add the keys again with narwhal evidence keys add",
			filepath.Join(s.Root, PrincipalKeysFile), PrincipalKeysSchema, PrincipalKeysSchemaVersion, err)
	}
	if out.Principals == nil {
		out.Principals = map[string][]string{}
	}
	return out, nil
}

// AddPrincipalKey registers pub for principal (once), under the store's
// lock so two operators adding keys keep both.
func (s *Store) AddPrincipalKey(principal string, pub sign.PublicKey) (bool, error) {
	added := false
	err := s.updateRootDoc(PrincipalKeysFile, func() (any, error) {
		keys, err := s.PrincipalKeys()
		if err != nil {
			return nil, err
		}
		pem := string(pub.PEM())
		if slices.Contains(keys.Principals[principal], pem) {
			return nil, nil
		}
		keys.Principals[principal] = append(keys.Principals[principal], pem)
		sort.Strings(keys.Principals[principal])
		added = true
		return keys, nil
	})
	return added && err == nil, err
}

// PutSignature stores a DSSE envelope over the record with digest.
func (s *Store) PutSignature(digest string, envelope []byte) error {
	if _, _, err := sign.ParseEnvelope(envelope); err != nil {
		return fmt.Errorf("signature for %s: %w", digest, err)
	}
	dir := filepath.Join(s.Root, signaturesDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("evidence store: %w", err)
	}
	return atomicfile.Write(filepath.Join(dir, digest+".dsse.json"), envelope, 0o644)
}

// signedBy is the principal the record names if its stored envelope
// verifies with a key registered for that principal, else "" and why.
func signedBy(keys PrincipalKeys, root, digest string, r evidence.Record) (string, string) {
	principal := r.Subject[evidence.SubjectPrincipal]
	b, err := os.ReadFile(filepath.Join(root, signaturesDir, digest+".dsse.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", "unsigned"
	}
	if err != nil {
		return "", err.Error()
	}
	env, payload, err := sign.ParseEnvelope(b)
	if err != nil {
		return "", err.Error()
	}
	why := fmt.Sprintf("no key registered for %s", principal)
	for _, pem := range keys.Principals[principal] {
		pub, err := sign.ParsePublicKey([]byte(pem))
		if err != nil {
			continue
		}
		st, err := sign.Verify(env, payload, pub)
		if err == nil {
			err = sign.CheckCovers(st, digest)
		}
		if err == nil {
			return principal, ""
		}
		why = err.Error()
	}
	return "", why
}

// Sign stores a DSSE envelope over the record with digest, signed with
// key (an in-toto Statement whose subject is the record, as `narwhal
// evidence sign` prints it).
func (s *Store) Sign(digest string, key sign.Key) error {
	_, raw, err := s.Get(digest)
	if err != nil {
		return err
	}
	st, err := sign.StatementFor(raw)
	if err != nil {
		return err
	}
	payload, err := st.Encode()
	if err != nil {
		return err
	}
	env, err := json.Marshal(sign.SignPayload(key, sign.PayloadType, payload))
	if err != nil {
		return err
	}
	return s.PutSignature(digest, env)
}

// Registered says pub is registered for principal.
func (k PrincipalKeys) Registered(principal string, pub sign.PublicKey) bool {
	return slices.Contains(k.Principals[principal], string(pub.PEM()))
}

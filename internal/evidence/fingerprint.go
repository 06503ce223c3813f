package evidence

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/narwhal-go/narwhal/internal/canon"
)

// Fingerprint is the digest of the identity projection of r: only ev:"id"
// fields, applied at every depth. Display fields (schema_version,
// observed_at, license, display, producer_version) never reach it, so the
// same claim observed twice has one fingerprint and two digests.
func (r Record) Fingerprint() (string, error) {
	if err := r.Validate(); err != nil {
		return "", err
	}
	_, d, err := canon.MarshalDigest(IdentityProjection(r))
	if err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	return d, nil
}

// IdentityProjection returns v with display fields removed. A struct with
// no ev tags is plain data and keeps every field.
func IdentityProjection(v any) any {
	return project(reflect.ValueOf(v))
}

func project(v reflect.Value) any {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct || !hasEvTags(v.Type()) {
		return v.Interface()
	}
	out := map[string]any{}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Tag.Get("ev") != "id" {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out[name] = project(v.Field(i))
	}
	return out
}

func hasEvTags(t reflect.Type) bool {
	for i := 0; i < t.NumField(); i++ {
		if _, ok := t.Field(i).Tag.Lookup("ev"); ok {
			return true
		}
	}
	return false
}

package canon

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Marshal encodes a Go value as canonical bytes. It is meant for records,
// and so it is stricter than encoding/json wherever encoding/json would
// silently change or drop something that identity depends on:
//
//   - struct fields tagged omitempty, omitzero or string are refused: a
//     record field is always present, so an empty identity field cannot
//     vanish from the hash (an absent optional value is a nil pointer and
//     encodes as null);
//   - nil slices and maps encode as [] and {}, the same bytes as empty ones;
//   - strings and map keys must be valid UTF-8 (encoding/json would
//     substitute U+FFFD);
//   - integers must be within ±2^53, floats finite; float32 and []byte are
//     refused (their JSON spelling is not the value a reader sees);
//   - types with their own MarshalJSON are trusted to produce JSON, which
//     then passes the same strict check as any input.
func Marshal(v any) ([]byte, error) {
	tree, err := toTree(reflect.ValueOf(v), "$")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tree); err != nil {
		return nil, &Error{Code: CodeUnsupportedValue, Offset: -1, Msg: err.Error()}
	}
	return Canonicalize(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// MarshalDigest returns the canonical bytes of v and their digest.
func MarshalDigest(v any) ([]byte, string, error) {
	b, err := Marshal(v)
	if err != nil {
		return nil, "", err
	}
	return b, Digest(b), nil
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

func unsupported(path, msg string) error {
	return &Error{Code: CodeUnsupportedValue, Offset: -1, Path: path, Msg: msg}
}

// toTree turns v into maps, slices and scalars that encoding/json writes
// without any choice left to it.
func toTree(v reflect.Value, path string) (any, error) {
	if !v.IsValid() {
		return nil, nil
	}
	if v.Kind() != reflect.Pointer && v.Kind() != reflect.Interface && v.Type().Implements(marshalerType) {
		return fromMarshaler(v, path)
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil, nil
		}
		if v.Kind() == reflect.Pointer && v.Type().Implements(marshalerType) {
			return fromMarshaler(v, path)
		}
		return toTree(v.Elem(), path)
	case reflect.Bool:
		return v.Bool(), nil
	case reflect.String:
		return checkedString(v.String(), path)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return checkedInt(v.Int(), path)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if v.Uint() > maxExactInteger {
			return nil, &Error{Code: CodeIntegerRange, Offset: -1, Path: path, Msg: "integer exceeds 2^53; carry it as a decimal string"}
		}
		return json.Number(strconv.FormatUint(v.Uint(), 10)), nil
	case reflect.Float64:
		return checkedFloat(v.Float(), path)
	case reflect.Slice, reflect.Array:
		return sliceTree(v, path)
	case reflect.Map:
		return mapTree(v, path)
	case reflect.Struct:
		return structTree(v, path)
	}
	return nil, unsupported(path, "values of type "+v.Type().String()+" have no canonical JSON form; use string, bool, int, float64, slice, map or struct")
}

func fromMarshaler(v reflect.Value, path string) (any, error) {
	b, err := v.Interface().(json.Marshaler).MarshalJSON()
	if err != nil {
		return nil, unsupported(path, "MarshalJSON failed: "+err.Error())
	}
	if err := check(b); err != nil {
		e := err.(*Error)
		e.Path = path
		return nil, e
	}
	return json.RawMessage(b), nil
}

func checkedString(s, path string) (any, error) {
	if !utf8.ValidString(s) {
		return nil, &Error{Code: CodeInvalidUTF8, Offset: -1, Path: path, Msg: "string is not valid UTF-8"}
	}
	return s, nil
}

func checkedInt(i int64, path string) (any, error) {
	if i > maxExactInteger || i < -maxExactInteger {
		return nil, &Error{Code: CodeIntegerRange, Offset: -1, Path: path, Msg: "integer exceeds 2^53 in magnitude; carry it as a decimal string"}
	}
	return json.Number(strconv.FormatInt(i, 10)), nil
}

func checkedFloat(f float64, path string) (any, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, &Error{Code: CodeNumberRange, Offset: -1, Path: path, Msg: "NaN and infinities have no JSON form; use null for 'not measured'"}
	}
	return f, nil
}

func sliceTree(v reflect.Value, path string) (any, error) {
	if v.Type().Elem().Kind() == reflect.Uint8 {
		return nil, unsupported(path, "byte slices are refused (encoding/json would write base64); store a hex string")
	}
	out := make([]any, v.Len())
	for i := range out {
		e, err := toTree(v.Index(i), path+"["+strconv.Itoa(i)+"]")
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

func mapTree(v reflect.Value, path string) (any, error) {
	if v.Type().Key().Kind() != reflect.String {
		return nil, unsupported(path, "map keys must be strings")
	}
	out := make(map[string]any, v.Len())
	it := v.MapRange()
	for it.Next() {
		k := it.Key().String()
		if !utf8.ValidString(k) {
			return nil, &Error{Code: CodeInvalidUTF8, Offset: -1, Path: path, Msg: "map key is not valid UTF-8"}
		}
		e, err := toTree(it.Value(), path+"."+k)
		if err != nil {
			return nil, err
		}
		out[k] = e
	}
	return out, nil
}

func structTree(v reflect.Value, path string) (any, error) {
	out := map[string]any{}
	if err := addFields(v, path, out); err != nil {
		return nil, err
	}
	return out, nil
}

// addFields writes the exported fields of struct v into out, flattening
// untagged embedded structs as encoding/json does.
func addFields(v reflect.Value, path string, out map[string]any) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		if opts != "" {
			return unsupported(path+"."+f.Name, "json tag option "+opts+" is refused on record types: every field is always present (nil pointer = null, empty collection = [] or {})")
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			if err := addFields(v.Field(i), path, out); err != nil {
				return err
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := out[name]; dup {
			return unsupported(path+"."+name, "two fields encode under the same name")
		}
		e, err := toTree(v.Field(i), path+"."+name)
		if err != nil {
			return err
		}
		out[name] = e
	}
	return nil
}

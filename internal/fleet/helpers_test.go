package fleet

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const examplePath = "../../examples/fleet.example.json"

// exampleDoc returns the complete example as a generic document to mutate.
func exampleDoc(t testing.TB) map[string]any {
	t.Helper()
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

var segmentRE = regexp.MustCompile(`^([^\[]+)(?:\[(\d+)\])?$`)

// walk finds the container holding the last segment of a dotted path such
// as "engines[0].url" or "controller.thresholds.shrink".
func walk(t testing.TB, doc map[string]any, path string) (map[string]any, string) {
	t.Helper()
	segs := strings.Split(path, ".")
	cur := doc
	for _, seg := range segs[:len(segs)-1] {
		m := segmentRE.FindStringSubmatch(seg)
		if m == nil {
			t.Fatalf("bad path %q", path)
		}
		next := cur[m[1]]
		if m[2] != "" {
			i, _ := strconv.Atoi(m[2])
			next = next.([]any)[i]
		}
		cur = next.(map[string]any)
	}
	return cur, segs[len(segs)-1]
}

type mutation func(t testing.TB, doc map[string]any)

// set puts v at path; a string starting with "#" is raw JSON text. The
// last segment may index a list ("engines[1]").
func set(path string, v any) mutation {
	return func(t testing.TB, doc map[string]any) {
		c, k := walk(t, doc, path)
		if s, ok := v.(string); ok && strings.HasPrefix(s, "#") {
			v = json.Number(s[1:])
		}
		if m := segmentRE.FindStringSubmatch(k); m != nil && m[2] != "" {
			i, _ := strconv.Atoi(m[2])
			c[m[1]].([]any)[i] = v
			return
		}
		c[k] = v
	}
}

func del(path string) mutation {
	return func(t testing.TB, doc map[string]any) {
		c, k := walk(t, doc, path)
		delete(c, k)
	}
}

func encode(t testing.TB, doc map[string]any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// env is a lookup over a fixed map.
func env(m map[string]string) LookupFunc {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

var noEnv = env(nil)

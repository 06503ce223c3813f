package fleet

import (
	"os"
	"testing"
)

// FuzzLoad: the loader never panics and returns exactly one of a config or
// an error; whatever loads also saves and loads back.
func FuzzLoad(f *testing.F) {
	for _, p := range []string{examplePath, "../../examples/fleet.minimal.json"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{``, `[]`, `{`, `{"schema":"narwhal.fleet","schema_version":1}`,
		`{"schema":"narwhal.fleet","schema_version":1,"model":"m","engines":[{"iid":"a","url":"${X}"}],"slo":{"ttft_s":NaN}}`,
		`{"schema":"narwhal.fleet","schema_version":1e400}`, "\xff"} {
		f.Add([]byte(s))
	}
	lookup := env(map[string]string{"X": "http://127.0.0.1:1/"})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.json", data, lookup)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("Parse returned cfg=%v err=%v: want exactly one", cfg, err)
		}
		if err != nil {
			return
		}
		out, err := cfg.MarshalDocument()
		if err != nil {
			t.Fatalf("a loaded config does not marshal: %v", err)
		}
		if _, err := Parse("saved.json", out, lookup); err != nil {
			t.Fatalf("a saved config does not load: %v\n%s", err, out)
		}
	})
}

package state

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeErrors(t *testing.T) {
	good, err := Encode(emptyDoc())
	if err != nil {
		t.Fatal(err)
	}
	replace := func(old, new string) string {
		if !strings.Contains(string(good), old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return strings.Replace(string(good), old, new, 1)
	}
	cases := []struct {
		name, doc, want string
		version         bool // want a *VersionError
	}{
		{"empty", " \n", "handoff: is empty", false},
		{"torn", string(good[:len(good)/2]), "", false},
		{"not json", "{nope", "is not valid JSON", false},
		{"trailing data", string(good) + "{}", "is not valid JSON at byte", false},
		{"wrong schema", replace(`"narwhal.handoff"`, `"narwhal.lease"`), `field schema: is not "narwhal.handoff"`, false},
		{"no version", replace(`"schema_version": 1,`, ``), "field schema_version: is missing", false},
		{"newer version with new fields", replace(`"schema_version": 1,`, `"schema_version": 2, "shiny": true,`),
			"handoff schema version 2 is newer than this build (writes and reads 1)", true},
		{"version not an integer", replace(`"schema_version": 1,`, `"schema_version": "1",`), `handoff schema version "1" is not a nonnegative integer`, true},
		{"unknown field", replace(`"run": "",`, `"run": "", "pins": {},`), "field pins: is not a narwhal.handoff v1 field", false},
		{"epoch fractional", replace(`"epoch": 0,`, `"epoch": 1.5,`), "field epoch: has a JSON number 1.5 where int is expected", false},
		{"epoch negative", replace(`"epoch": 0,`, `"epoch": -1,`), "field epoch: must be an integer ≥ 0", false},
		{"lifecycle null", replace(`"lifecycle": {`, `"lifecycle": null, "x": {`), "", false},
		{"roles name unknown engine", replace(`"e1": "decode"`, `"e1": "decode", "e7": "decode"`), `field roles.e7: names engine "e7"`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			if err == nil {
				t.Fatal("want an error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v\nwant it to contain %q", err, tc.want)
			}
			var ve *VersionError
			if errors.As(err, &ve) != tc.version {
				t.Errorf("VersionError = %v, want %v (err %v)", !tc.version, tc.version, err)
			}
		})
	}
}

func TestDecodeLifecycleRequired(t *testing.T) {
	doc := `{"schema":"narwhal.handoff","schema_version":1,"at":1,"run":"","model":"","epoch":0,"holder":"",
	"engines":[],"roles":{},"ejected":[],"inference_sources":{},"counters":{},"outcome_reasons":{},"demand_risk":null}`
	_, err := Decode([]byte(doc))
	if err == nil || !strings.Contains(err.Error(), "field lifecycle: is missing") {
		t.Fatalf("error = %v, want lifecycle reported missing", err)
	}
}

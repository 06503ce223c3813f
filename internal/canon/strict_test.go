package canon

import (
	"strings"
	"testing"
)

func TestDecodeStrict(t *testing.T) {
	type rec struct {
		A int `json:"a"`
	}
	for _, c := range []struct {
		in, err string
		want    int
	}{
		{in: `{"a":1}`, want: 1},
		{in: ` {"a":2} `, want: 2},
		{in: `{"a":1,"b":2}`, err: `unknown field "b"`},
		{in: `{"a":1}{"a":2}`, err: "trailing data"},
		{in: `{"a":`, err: "unexpected EOF"},
	} {
		var r rec
		err := DecodeStrict([]byte(c.in), &r)
		switch {
		case c.err == "" && (err != nil || r.A != c.want):
			t.Errorf("%s: got %+v, %v; want a=%d", c.in, r, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want one containing %q", c.in, err, c.err)
		}
	}
}

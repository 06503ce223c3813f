package simengine

import "testing"

// repr and json.dumps escape differently; both go through pyQuote.
func TestPythonQuoting(t *testing.T) {
	for _, c := range []struct {
		name, got, want string
	}{
		{"repr plain", pyRepr("abc"), `'abc'`},
		{"repr single quote switches", pyRepr("a'b"), `"a'b"`},
		{"repr both quotes", pyRepr("a'\"b"), `'a\'"b'`},
		{"repr controls", pyRepr("x\ny\t\r\x01\x7f\\"), `'x\ny\t\r\x01\x7f\\'`},
		{"repr non-ascii kept", pyRepr("é"), `'é'`},
		{"json plain", pyStr("abc"), `"abc"`},
		{"json escapes", pyStr("a\"\\\b\f\n\r\t"), `"a\"\\\b\f\n\r\t"`},
		{"json control and DEL", pyStr("\x01\x7f"), `"\u0001\u007f"`},
		{"json non-ascii", pyStr("é"), `"\u00e9"`},
		{"json astral pair", pyStr("😀"), `"\ud83d\ude00"`},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, c.got, c.want)
		}
	}
}

package canon

import (
	"testing"
)

func TestRejections(t *testing.T) {
	cases := []struct {
		name string
		in   string
		code Code
	}{
		{"invalid utf8 in string", "{\"a\":\"\xff\"}", CodeInvalidUTF8},
		{"invalid utf8 in key", "{\"\xc3\x28\":1}", CodeInvalidUTF8},
		{"truncated utf8", "\"\xe2\x82\"", CodeInvalidUTF8},
		{"invalid utf8 outside string", "[\xff]", CodeInvalidUTF8},
		{"lone high surrogate", `"\ud800"`, CodeLoneSurrogate},
		{"lone high surrogate upper-case", `"\uD800"`, CodeLoneSurrogate},
		{"lone low surrogate", `"\udc00"`, CodeLoneSurrogate},
		{"reversed pair", `"\udc00\ud800"`, CodeLoneSurrogate},
		{"high then letter", `"\ud83dx"`, CodeLoneSurrogate},
		{"high then non-low escape", `"\ud83d\u0041"`, CodeLoneSurrogate},
		{"duplicate key", `{"a":1,"a":2}`, CodeDuplicateKey},
		{"duplicate key via escape", `{"a":1,"\u0061":2}`, CodeDuplicateKey},
		{"duplicate key nested", `[{"x":{"b":true,"b":false}}]`, CodeDuplicateKey},
		{"integer 2^53+1", `9007199254740993`, CodeIntegerRange},
		{"negative integer beyond 2^53", `-9007199254740993`, CodeIntegerRange},
		{"integer with zero fraction", `9007199254740993.0`, CodeIntegerRange},
		{"huge integer", `123456789012345678901234567890`, CodeIntegerRange},
		{"exponent into integer range", `1e20`, CodeIntegerRange},
		{"number beyond double", `1E400`, CodeNumberRange},
		{"negative beyond double", `-1e309`, CodeNumberRange},
		{"leading zero", `01`, CodeSyntax},
		{"bare dot", `1.`, CodeSyntax},
		{"trailing comma", `[1,]`, CodeSyntax},
		{"trailing content", `{} {}`, CodeSyntax},
		{"raw control char", "\"a\tb\"", CodeSyntax},
		{"single quotes", `{'a':1}`, CodeSyntax},
		{"NaN literal", `NaN`, CodeSyntax},
		{"empty input", ``, CodeSyntax},
		{"unterminated", `{"a":`, CodeSyntax},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Canonicalize([]byte(c.in))
			if got := CodeOf(err); got != c.code {
				t.Fatalf("Canonicalize(%q): code %q (%v), want %q", c.in, got, err, c.code)
			}
		})
	}
}

func TestAcceptedEdges(t *testing.T) {
	cases := []struct{ in, want string }{
		{`9007199254740992`, `9007199254740992`},
		{`-9007199254740992`, `-9007199254740992`},
		{`-0`, `0`},
		{`1e21`, `1e+21`},
		{`1E30`, `1e+30`},
		{`5e-324`, `5e-324`},
		{`1e-7`, `1e-7`},
		{`0.000001`, `0.000001`},
		{`4.50`, `4.5`},
		{`1e-400`, `0`},
		{`"\ud83d\ude02"`, `"😂"`},
		{`"\u00E9"`, `"é"`},
		{`"\u2028\u007f"`, "\"\u2028\u007f\""},
		{`"\/"`, `"/"`},
		{`"\u001F"`, `"\u001f"`},
		{` [ ] `, `[]`},
	}
	for _, c := range cases {
		got, err := Canonicalize([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("Canonicalize(%s) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestErrorMessageIsOneLineWithOffset(t *testing.T) {
	_, err := Canonicalize([]byte(`{"a":1,"a":2}`))
	want := `canon: duplicate_key at byte 7: key "a" appears twice in one object; keep one of them`
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v\nwant   %s", err, want)
	}
}

func TestDeepNestingRefused(t *testing.T) {
	deep := make([]byte, 0, 2*1001)
	for i := 0; i < 1001; i++ {
		deep = append(deep, '[')
	}
	for i := 0; i < 1001; i++ {
		deep = append(deep, ']')
	}
	if _, err := Canonicalize(deep); CodeOf(err) != CodeTooDeep {
		t.Fatalf("1001 levels: %v, want too_deep", err)
	}
	if _, err := Canonicalize(deep[1 : len(deep)-1]); err != nil {
		t.Fatalf("1000 levels: %v", err)
	}
}

func TestVerifyCanonicalExamples(t *testing.T) {
	canonical := `{"a":[1,"x/y",true],"b":1.5}`
	if err := VerifyCanonical([]byte(canonical)); err != nil {
		t.Fatalf("canonical refused: %v", err)
	}
	for _, in := range []string{
		`{"b":1.5,"a":[1,"x/y",true]}`,
		`{"a": [1,"x/y",true],"b":1.5}`,
		`{"a":[1.0,"x/y",true],"b":1.5}`,
		`{"a":[1,"x\/y",true],"b":1.5}`,
		`{"a":[1,"x/y",true],"b":15e-1}`,
		`{"a":[1,"\u0078/y",true],"b":1.5}`,
		canonical + "\n",
	} {
		if err := VerifyCanonical([]byte(in)); CodeOf(err) != CodeNotCanonical {
			t.Errorf("VerifyCanonical(%s) = %v, want not_canonical", in, err)
		}
		if _, err := VerifiedDigest([]byte(in)); err == nil {
			t.Errorf("VerifiedDigest(%s) digested non-canonical bytes", in)
		}
	}
}

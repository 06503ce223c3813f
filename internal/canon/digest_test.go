package canon

import (
	"encoding/hex"
	"strings"
	"testing"
)

func TestDigestKnownValues(t *testing.T) {
	// The multihash specification's example: sha2-256 of "multihash".
	if got := Digest([]byte("multihash")); got != "12209cbc07c3f991725836a3aa2a581ca2029198aa420b9d99bc0e131d9f3e2cbe47" {
		t.Fatalf("Digest(multihash) = %s", got)
	}
	if got := Digest([]byte("{}")); got != "122044136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a" {
		t.Fatalf("Digest({}) = %s", got)
	}
}

func TestDigestRoundTrip(t *testing.T) {
	d := Digest([]byte(`{"a":1}`))
	sum, err := ParseDigest(d)
	if err != nil {
		t.Fatal(err)
	}
	if DigestPrefix+hex.EncodeToString(sum[:]) != d {
		t.Fatalf("round trip changed %s", d)
	}
}

func TestParseDigestRejects(t *testing.T) {
	good := Digest([]byte("x"))
	for _, s := range []string{
		"",
		good[:len(good)-1],
		good + "0",
		strings.ToUpper(good),
		"1320" + good[4:],
		"sha256:" + good[4:],
		good[:10] + "g" + good[11:],
	} {
		if _, err := ParseDigest(s); err == nil {
			t.Errorf("ParseDigest(%q) accepted", s)
		}
	}
}

package testkit

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"testing"
)

// FreeAddr is a loopback host:port nothing listens on right now, for a
// program the test starts that takes its address as a flag.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// PromQuery runs an instant query against the Prometheus at base and
// returns the first sample's value; false when it answers no sample (or
// does not answer).
func PromQuery(base, query string) (string, bool) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Result []struct {
				Value []any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.NewDecoder(resp.Body).Decode(&out) != nil || len(out.Data.Result) == 0 || len(out.Data.Result[0].Value) != 2 {
		return "", false
	}
	v, _ := out.Data.Result[0].Value[1].(string)
	return v, true
}

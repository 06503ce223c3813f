package attest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// ParseContract validates a contract object with exactly the fleet
// loader's rules (kinds, unknown keys, required vllm_version and
// connector, image digest form, transfer mode, enforce_handshake_compat):
// it wraps the object in a minimal fleet document and loads that, so a
// contract the sidecar accepts is one the fleet accepts. Problems name
// contract.<field>.
func ParseContract(raw json.RawMessage) (*fleet.EngineContract, []string) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.TrimSpace(raw)[0] != '{' {
		return nil, []string{"contract must be an object"}
	}
	var doc bytes.Buffer
	doc.WriteString(`{"schema":"narwhal.fleet","schema_version":1,"model":"m","engines":[{"iid":"e","url":"http://e"}],"slo":{"ttft_s":1,"tpot_s":1},"engine_contract":`)
	doc.Write(raw)
	doc.WriteString(`}`)
	cfg, err := fleet.Parse("contract", doc.Bytes(), func(string) (string, bool) { return "", false })
	if err != nil {
		var le *fleet.LoadError
		if !errors.As(err, &le) {
			return nil, []string{err.Error()}
		}
		out := make([]string, len(le.Problems))
		for i, p := range le.Problems {
			out[i] = strings.ReplaceAll(p.Message, "engine_contract", "contract")
		}
		return nil, out
	}
	return cfg.EngineContract, nil
}

// FieldDiff is one contract field on which two contracts differ.
type FieldDiff struct {
	Field    string
	Observed string // Python-repr-like rendering: 'x', 4, True, None
	Expected string
}

// Diff lists the fields where observed differs from expected, in table
// order.
func Diff(observed, expected *fleet.EngineContract) []FieldDiff {
	o, e := ContractValues(observed), ContractValues(expected)
	var out []FieldDiff
	for _, f := range ContractFields {
		ov, ev := repr(o[f]), repr(e[f])
		if ov != ev {
			out = append(out, FieldDiff{Field: f, Observed: ov, Expected: ev})
		}
	}
	return out
}

// repr renders a contract value the way the reference's messages do.
func repr(v any) string {
	switch x := v.(type) {
	case string:
		return "'" + strings.ReplaceAll(x, "'", `\'`) + "'"
	case int:
		return strconv.Itoa(x)
	case bool:
		if x {
			return "True"
		}
		return "False"
	case *bool:
		if x == nil {
			return "None"
		}
		return repr(*x)
	}
	return fmt.Sprint(v)
}

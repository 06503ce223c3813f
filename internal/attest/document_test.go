package attest

import (
	"strings"
	"testing"
)

const fullContract = `{"vllm_version":"0.21.0","image_digest":"sha256:0cde59af70e00b206e8f88346edface9e2d9373fc54dc13d175f704d73718768",
"nixl_version":"0.6.1","nixl_connector_version":4,"model_architecture":"LlamaForCausalLM","model_dtype":"bfloat16",
"kv_heads":8,"head_size":128,"hidden_layers":32,"attention_backend":"FLASH_ATTN","kv_cache_dtype":"auto",
"cross_layers_blocks":false,"hybrid_kv_cache_manager":true,"connector":"NixlConnector","kv_role":"kv_both",
"transfer_mode":"pull","speculative_config":"disabled","enforce_handshake_compat":true}`

func fullSources(except ...string) string {
	skip := map[string]bool{}
	for _, e := range except {
		skip[e] = true
	}
	var parts []string
	for _, f := range ContractFields {
		if !skip[f] {
			parts = append(parts, `"`+f+`":"/runs/engine-launch-x/checked.json sha256:ab"`)
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func doc(contract, sources string) string {
	return `{"schema":"narwhal.attestation","schema_version":1,"contract":` + contract + `,"sources":` + sources + `}`
}

func TestParse(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // "" = accepted; else a substring of the error
	}{
		{"complete", doc(fullContract, fullSources()), ""},
		{"missing source names the field", doc(fullContract, fullSources("kv_heads")), "populated contract field(s) kv_heads"},
		{"empty source counts as missing", doc(fullContract, strings.Replace(fullSources(), `"head_size":"/runs/engine-launch-x/checked.json sha256:ab"`, `"head_size":" "`, 1)), "sources.head_size must be a non-empty string"},
		{"false boolean is populated", doc(fullContract, fullSources("cross_layers_blocks")), "cross_layers_blocks"},
		{"defaults need sources too", doc(`{"vllm_version":"0.21.0"}`, `{"vllm_version":"x"}`), "connector, enforce_handshake_compat"},
		{"minimal with sources", doc(`{"vllm_version":"0.21.0"}`, `{"vllm_version":"x","connector":"y","enforce_handshake_compat":"z"}`), ""},
		{"unknown source key", doc(fullContract, strings.TrimSuffix(fullSources(), "}")+`,"gpu":"x"}`), "sources.gpu is not a contract field"},
		{"unknown top key", `{"schema":"narwhal.attestation","schema_version":1,"contract":{},"sources":{},"extra":1}`, "unknown field(s): extra"},
		{"missing sources", `{"schema":"narwhal.attestation","schema_version":1,"contract":{}}`, "missing field(s): sources"},
		{"wrong schema", `{"schema":"narwhal.fleet","schema_version":1,"contract":{},"sources":{}}`, `schema is "narwhal.fleet"`},
		{"newer version", `{"schema":"narwhal.attestation","schema_version":2,"contract":{},"sources":{}}`, "newer than this narwhal"},
		{"contract kind", doc(`{"vllm_version":"0.21.0","kv_heads":"8"}`, fullSources()), "contract.kv_heads must be an integer"},
		{"contract bool is no int", doc(`{"vllm_version":"0.21.0","kv_heads":true}`, fullSources()), "contract.kv_heads must be an integer"},
		{"contract unknown key", doc(`{"vllm_version":"0.21.0","engine_version":"x"}`, fullSources()), "unknown contract key 'engine_version'"},
		{"handshake compat off", doc(`{"vllm_version":"0.21.0","enforce_handshake_compat":false}`, fullSources()), "enforce_handshake_compat must stay true"},
		{"vllm_version required", doc(`{"connector":"NixlConnector"}`, fullSources()), "contract.vllm_version is required"},
		{"not an object", `[]`, "is not a JSON object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Parse("engine-attestation.json", []byte(tc.in))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if d.Contract.VLLMVersion != "0.21.0" {
					t.Fatalf("contract not read: %+v", d.Contract)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want it to contain %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "attestation document engine-attestation.json: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
		})
	}
}

func TestDiffNamesFields(t *testing.T) {
	a, errs := ParseContract([]byte(fullContract))
	if errs != nil {
		t.Fatal(errs)
	}
	b := *a
	b.KVHeads, b.VLLMVersion, b.CrossLayersBlocks = 4, "0.22.0", nil
	got := Diff(&b, a)
	want := []FieldDiff{{"vllm_version", "'0.22.0'", "'0.21.0'"}, {"kv_heads", "4", "8"}, {"cross_layers_blocks", "None", "False"}}
	if len(got) != len(want) {
		t.Fatalf("Diff = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Diff[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if d := Diff(a, a); len(d) != 0 {
		t.Fatalf("Diff of equal contracts = %+v", d)
	}
}

func TestExampleDocumentLoads(t *testing.T) {
	d, err := Load("../../examples/attestation.example.json")
	if err != nil {
		t.Fatal(err)
	}
	if !d.Contract.Complete() {
		t.Fatalf("the example contract is incomplete: %v", d.Contract.Missing())
	}
}

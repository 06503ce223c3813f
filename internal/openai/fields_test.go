package openai

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/testkit"
)

// vllmFields reads testdata/vllm_request_fields.txt: the field names of
// vLLM's request models at the commit fields.go cites.
func vllmFields(t *testing.T) map[Endpoint][]string {
	t.Helper()
	f, err := os.Open("testdata/vllm_request_fields.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[Endpoint][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		model, name, ok := strings.Cut(line, " ")
		switch {
		case ok && model == "chat":
			out[Chat] = append(out[Chat], name)
		case ok && model == "completion":
			out[Completion] = append(out[Completion], name)
		default:
			t.Fatalf("testdata line %q: want \"chat NAME\" or \"completion NAME\"", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Fields names every field vLLM's two request models have, each once, and
// nothing they lack: a field vLLM adds is a field the router must decide
// about.
func TestFieldsMatchVLLM(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Fields {
		if seen[f.Name] {
			t.Errorf("%s is listed twice", f.Name)
		}
		seen[f.Name] = true
		if f.Note == "" {
			t.Errorf("%s has no note saying why it is handled so", f.Name)
		}
	}
	for in, names := range vllmFields(t) {
		ours := FieldNames(in)
		for _, n := range names {
			if !slices.Contains(ours, n) {
				t.Errorf("vLLM's %s request has %q; internal/openai/fields.go does not say how the router handles it", endpointName(in), n)
			}
		}
		for _, n := range ours {
			if !slices.Contains(names, n) {
				t.Errorf("fields.go lists %q for %s; vLLM's request model has no such field", n, endpointName(in))
			}
		}
	}
}

func endpointName(in Endpoint) string {
	if in == Chat {
		return "chat"
	}
	return "completion"
}

// refusedSamples are, per field with a Refused rule, a body the rule
// refuses; the body is one endpoint's (chat true for messages).
var refusedSamples = map[string]struct {
	chat bool
	body string
}{
	"model":                 {false, `{"model":"other","prompt":"hi"}`},
	"max_tokens":            {false, `{"prompt":"hi","max_tokens":0}`},
	"max_completion_tokens": {true, `{"messages":[{"role":"user","content":"a"}],"max_completion_tokens":0}`},
	"n":                     {false, `{"prompt":"hi","n":2}`},
	"stream":                {false, `{"prompt":"hi","stream":"yes"}`},
	"stream_options":        {false, `{"prompt":"hi","stream_options":{"include_usage":true}}`},
	"tools":                 {true, `{"messages":[{"role":"user","content":"a"}],"tools":[{"type":"code_interpreter"}]}`},
	"use_beam_search":       {false, `{"prompt":"hi","use_beam_search":true}`},
	"prompt_logprobs":       {false, `{"prompt":"hi","prompt_logprobs":0}`},
	"echo":                  {true, `{"messages":[{"role":"user","content":"a"}],"echo":true,"logprobs":true}`},
	"kv_transfer_params":    {false, `{"prompt":"hi","kv_transfer_params":{"do_remote_decode":true}}`},
	"vllm_xargs":            {false, `{"prompt":"hi","vllm_xargs":{"kv_transfer_params":1}}`},
	"prompt_embeds":         {false, `{"prompt":"hi","prompt_embeds":"AAAA"}`},
}

// Every field with a Refused rule is refused by name, before any leg runs.
func TestFieldsRefusedByName(t *testing.T) {
	for _, f := range Fields {
		if f.Refused == "" {
			continue
		}
		s, ok := refusedSamples[f.Name]
		if !ok {
			t.Errorf("%s is refused (%s) but the test has no body it refuses", f.Name, f.Refused)
			continue
		}
		_, e := Validate(body(t, s.body), s.chat, "m")
		switch {
		case e == nil:
			t.Errorf("%s: %s accepted; want a refusal naming %s", f.Name, s.body, f.Name)
		case e.Param == nil || *e.Param != f.Name:
			t.Errorf("%s: refused with param %v (%s), want %s", f.Name, e.Param, e.Message, f.Name)
		case e.Status >= 500:
			t.Errorf("%s: status %d, want a 4xx", f.Name, e.Status)
		}
	}
}

// The logprobs fields are checked as vLLM's check_logprobs does, on the
// endpoint's own type; echo alone and logprobs alone pass.
func TestValidateLogprobs(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"a"}]`
	for _, tc := range []struct {
		name, body string
		chat       bool
		param      string
	}{
		{"chat logprobs and top 3", `{` + msgs + `,"logprobs":true,"top_logprobs":3}`, true, ""},
		{"chat top -1", `{` + msgs + `,"logprobs":true,"top_logprobs":-1}`, true, ""},
		{"chat top 0 alone", `{` + msgs + `,"top_logprobs":0}`, true, ""},
		{"chat echo alone", `{` + msgs + `,"echo":true}`, true, ""},
		{"chat echo without logprobs", `{` + msgs + `,"echo":true,"logprobs":false}`, true, ""},
		{"completion logprobs 2", `{"prompt":"hi","logprobs":2}`, false, ""},
		{"completion echo alone", `{"prompt":"hi","echo":true}`, false, ""},
		{"beam search off", `{"prompt":"hi","use_beam_search":false}`, false, ""},
		{"chat logprobs an integer", `{` + msgs + `,"logprobs":2}`, true, "logprobs"},
		{"chat top without logprobs", `{` + msgs + `,"top_logprobs":2}`, true, "top_logprobs"},
		{"chat top -2", `{` + msgs + `,"logprobs":true,"top_logprobs":-2}`, true, "top_logprobs"},
		{"chat top a float", `{` + msgs + `,"logprobs":true,"top_logprobs":2.5}`, true, "top_logprobs"},
		{"completion logprobs a boolean", `{"prompt":"hi","logprobs":true}`, false, "logprobs"},
		{"completion logprobs -1", `{"prompt":"hi","logprobs":-1}`, false, "logprobs"},
		{"completion echo with logprobs", `{"prompt":"hi","echo":true,"logprobs":0}`, false, "echo"},
	} {
		_, e := Validate(body(t, tc.body), tc.chat, "m")
		switch {
		case tc.param == "" && e != nil:
			t.Errorf("%s: refused (%s %s)", tc.name, *e.Param, e.Message)
		case tc.param != "" && e == nil:
			t.Errorf("%s: accepted; want a refusal naming %s", tc.name, tc.param)
		case tc.param != "" && *e.Param != tc.param:
			t.Errorf("%s: refused naming %s, want %s", tc.name, *e.Param, tc.param)
		}
	}
}

// fieldsTable is docs/router.md's "Request fields" table.
func fieldsTable() string {
	var b strings.Builder
	b.WriteString("| Field | Chat | Completions | Prefill leg | Decode leg | Refused (4xx, `param` = field) | Why |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	mark := func(in, e Endpoint) string {
		if in&e != 0 {
			return "✓"
		}
		return ""
	}
	for _, f := range Fields {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s |\n", f.Name, mark(f.In, Chat), mark(f.In, Completion),
			f.Prefill, f.Decode, f.Refused, f.Note)
	}
	return b.String()
}

// docs/router.md carries the table of Fields as it is
// (NARWHAL_WRITE_TABLES=1 rewrites it).
func TestFieldsTableInDocs(t *testing.T) {
	const doc = "../../docs/router.md"
	tab := fieldsTable()
	if os.Getenv("NARWHAL_WRITE_TABLES") == "1" {
		testkit.WriteDocSection(t, doc, "request-fields", tab)
	}
	raw, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "<!-- request-fields:begin -->\n"+tab+"<!-- request-fields:end -->") {
		t.Errorf("%s: the request-fields table is stale; run NARWHAL_WRITE_TABLES=1 go test ./internal/openai/ -run TestFieldsTableInDocs", doc)
	}
}

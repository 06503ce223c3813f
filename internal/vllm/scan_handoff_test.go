package vllm

import (
	"bytes"
	"testing"
)

// nixlParams is the descriptor vLLM's NIXL connector returns from a
// producer (request_finished in nixl_connector.py).
const nixlParams = `{"do_remote_prefill":true,"do_remote_decode":false,"remote_block_ids":[4,5,6],"remote_engine_id":"2f1c4e0a-6b7d-4c8e-9a0b-1d2e3f405162","remote_host":"10.0.0.7","remote_port":5600,"tp_size":1,"remote_request_id":"cmpl-r1-a1-prefill-0"}`

// The scanner answers the shapes engines send, so the decoding path is
// the exception.
func TestFastHandoffTakesEngineShapes(t *testing.T) {
	for _, in := range []string{nixlParams,
		`{"remote_engine_id":"e","remote_block_ids":[[1],[2,3]],"remote_num_tokens":42}`,
		`{"remote_engine_id":"e","remote_block_ids":[]}`,
	} {
		h, ok := fastHandoff([]byte(in))
		if !ok || h.EngineID == "" || !bytes.Equal(h.Params, []byte(in)) {
			t.Errorf("%s: fast %v %+v, want it answered with the params kept", in, ok, h)
		}
	}
	if h, _ := fastHandoff([]byte(`{"remote_engine_id":"e","remote_block_ids":[1],"remote_num_tokens":42}`)); h.Tokens != 42 {
		t.Errorf("remote_num_tokens read as %d, want 42", h.Tokens)
	}
}

// Whenever the scanner answers, decoding gives the same handoff.
func FuzzFastHandoff(f *testing.F) {
	for _, in := range []string{nixlParams, `{"remote_engine_id":"e","remote_block_ids":[[1],[2,3]],"remote_num_tokens":7}`,
		`{"remote_engine_id":"e","remote_block_ids":[1,[2]]}`, `{"remote_engine_id":"e","remote_engine_id":"f","remote_block_ids":[1]}`,
		`{"remote_engine_id":"e\u0041","remote_block_ids":[1]}`, `{"remote_engine_id":"e","remote_block_ids":[01]}`,
		`{"remote_engine_id":"e", "remote_block_ids":[1]}`, `{"Remote_Engine_Id":"e","remote_block_ids":[1]}`,
		`{"remote_engine_id":"e","remote_block_ids":[1],"remote_num_tokens":-1}`, `{"remote_engine_id":"e","remote_block_ids":[ [ ] ]}`} {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		h, ok := fastHandoff(params)
		if !ok {
			return
		}
		want, e := decodeHandoff(append([]byte(nil), params...))
		if e != nil || want.EngineID != h.EngineID || want.Tokens != h.Tokens || !bytes.Equal(want.Params, h.Params) {
			t.Fatalf("%q\nscanner %+v\ndecoder %+v (%v)", params, h, want, e)
		}
	})
}

// prefillResponse is a producer's whole answer as vLLM writes it.
const prefillResponse = `{"id":"cmpl-r1-a1-prefill","object":"text_completion","created":1764590000,"model":"m","choices":[{"index":0,"text":" The","logprobs":null,"finish_reason":"length","stop_reason":null,"prompt_logprobs":null,"kv_transfer_params":` + nixlParams + `}],"usage":{"prompt_tokens":48,"total_tokens":49,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":32}},"kv_transfer_params":null}`

func BenchmarkParseHandoff(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if h, e := parseHandoff([]byte(prefillResponse)); e != nil || *h.CachedTokens != 32 {
			b.Fatal(h, e)
		}
	}
}

func TestFastProducerTakesEngineShapes(t *testing.T) {
	f, ok := fastProducer([]byte(prefillResponse))
	if !ok || string(f.choice) != nixlParams || string(f.top) != "null" || !f.details || f.cached == nil || *f.cached != 32 {
		t.Fatalf("vLLM's prefill response: fast %v, %+v; want the choice's params, top null, 32 cached", ok, f)
	}
}

// Whenever the scanner answers, decoding reads the same fields.
func FuzzFastProducer(f *testing.F) {
	for _, in := range []string{prefillResponse, `{"kv_transfer_params":{"remote_engine_id":"e","remote_block_ids":[1]}}`,
		`{"choices":[{"kv_transfer_params":{"a":1}},{"text":"x"}],"usage":{"prompt_tokens_details":null}}`,
		`{"choices":[null]}`, `{"choices":null,"usage":null}`, `{"Choices":[]}`, `{"usage":{"prompt_tokens_details":{"cached_tokens":-1}}}`,
		`{"usage":{"prompt_tokens_details":null,"prompt_tokens_details":{"cached_tokens":3}}}`, `{"choices":[{"kv_transfer_params":1,"kv_transfer_params":2}]}`,
		`{"usage":{"prompt_tokens_details":{"cached_tokens":null}}}`, `{"choices":{}}`} {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := fastProducer(body)
		if !ok {
			return
		}
		want, e := decodeProducer(append([]byte(nil), body...))
		same := e == nil && bytes.Equal(got.top, want.top) && bytes.Equal(got.choice, want.choice) && got.details == want.details &&
			(got.cached == nil) == (want.cached == nil) && (got.cached == nil || *got.cached == *want.cached)
		if !same {
			t.Fatalf("%q\nscanner %+v\ndecoder %+v (%v)", body, got, want, e)
		}
	})
}

package openai

// The request fields vLLM serves, each with what the two-leg path does
// with it, so no field is silently dropped (issue 28). The names are every
// field of vLLM's request models at one commit:
//
//	ChatCompletionRequest: https://github.com/vllm-project/vllm/blob/d5dba2d7b0ab9b98096560c69db7126b54b14d79/vllm/entrypoints/openai/chat_completion/protocol.py
//	CompletionRequest:     https://github.com/vllm-project/vllm/blob/d5dba2d7b0ab9b98096560c69db7126b54b14d79/vllm/entrypoints/openai/completion/protocol.py
//
// testdata/vllm_request_fields.txt holds the same names as read from those
// files; TestFieldsMatchVLLM fails when the two disagree, and
// internal/router's TestFieldsReachTheirLegs sends every field through a
// router and checks each leg's body.

// Fate is what happens to a client's field on one leg.
type Fate uint8

const (
	Forward Fate = iota // the client's value, unchanged
	Drop                // removed from the leg's body
	Own                 // replaced by the router's own value
)

func (f Fate) String() string { return [...]string{"forwarded", "dropped", "router's value"}[f] }

// Endpoint says which request models have a field.
type Endpoint uint8

const (
	Chat        Endpoint = 1 << iota // ChatCompletionRequest
	Completion                       // CompletionRequest
	AnyEndpoint = Chat | Completion
)

// Field is one vLLM request field and its handling.
type Field struct {
	Name            string
	In              Endpoint
	Prefill, Decode Fate
	// Refused says when the router answers 400 with param naming the
	// field; "" when it never does.
	Refused string
	Note    string
}

// both is a field forwarded unchanged to both legs: sampling and prompt
// shaping must be the same on the leg that computes the prompt's KV and
// the leg that continues from it.
func both(name string, in Endpoint, note string) Field {
	return Field{Name: name, In: in, Prefill: Forward, Decode: Forward, Note: note}
}

// decodeOnly is a field the producer leg (one token, not streamed) cannot
// take, forwarded to the decode leg only.
func decodeOnly(name string, in Endpoint, note string) Field {
	return Field{Name: name, In: in, Prefill: Drop, Decode: Forward, Note: note}
}

const (
	samePrompt   = "shapes the prompt: both legs must see the same tokens"
	sampling     = "sampling: both legs sample alike"
	decodeAnswer = "the decode leg's tokens are the client's; the prefill leg's one token is discarded"
)

// Fields is every field of both request models, in vLLM's order (chat's,
// then the completion-only ones).
var Fields = []Field{
	both("messages", Chat, samePrompt),
	{Name: "model", In: AnyEndpoint, Prefill: Own, Decode: Own, Refused: "another model than the served one (404 model_not_found)",
		Note: "the served model's name on both legs"},
	both("frequency_penalty", AnyEndpoint, sampling),
	both("logit_bias", AnyEndpoint, sampling),
	both("logprobs", AnyEndpoint, "answered by the decode leg ("+decodeAnswer+"); chat: a boolean, completions: an integer"),
	both("top_logprobs", Chat, "answered by the decode leg, with logprobs"),
	{Name: "max_tokens", In: AnyEndpoint, Prefill: Own, Decode: Forward, Refused: "not an integer ≥ 1",
		Note: "1 on the prefill leg; the client's budget on the decode leg"},
	{Name: "max_completion_tokens", In: Chat, Prefill: Drop, Decode: Forward, Refused: "not an integer ≥ 1",
		Note: "the prefill leg runs max_tokens 1"},
	{Name: "n", In: AnyEndpoint, Prefill: Drop, Decode: Forward, Refused: "anything but 1",
		Note: "the prefill leg generates one sequence and both legs must agree"},
	both("presence_penalty", AnyEndpoint, sampling),
	both("response_format", AnyEndpoint, "constrains the output"),
	both("seed", AnyEndpoint, sampling),
	both("stop", AnyEndpoint, "applied by the decode leg"),
	{Name: "stream", In: AnyEndpoint, Prefill: Own, Decode: Own, Refused: "not a boolean",
		Note: "the prefill leg is never streamed and the decode leg always is; the client's value picks a relayed stream or an assembled answer"},
	{Name: "stream_options", In: AnyEndpoint, Prefill: Drop, Decode: Forward, Refused: "not an object of booleans, or without stream: true",
		Note: "the prefill leg is not streamed"},
	both("temperature", AnyEndpoint, sampling),
	both("top_p", AnyEndpoint, sampling),
	{Name: "tools", In: Chat, Prefill: Forward, Decode: Forward, Refused: "a non-function tool without stream: true",
		Note: samePrompt + " (the chat template renders them)"},
	both("tool_choice", Chat, "constrains the output"),
	both("reasoning_effort", Chat, samePrompt+" (a chat template argument)"),
	both("include_reasoning", Chat, "shapes the decode leg's output"),
	both("parallel_tool_calls", Chat, "shapes the decode leg's output"),
	both("user", AnyEndpoint, "ignored by vLLM"),
	{Name: "use_beam_search", In: AnyEndpoint, Prefill: Forward, Decode: Forward, Refused: "true",
		Note: "vLLM's beam search runs its own generation loop, which the KV handoff cannot split"},
	both("top_k", AnyEndpoint, sampling),
	both("min_p", AnyEndpoint, sampling),
	both("repetition_penalty", AnyEndpoint, sampling),
	both("length_penalty", AnyEndpoint, "beam search only"),
	both("stop_token_ids", AnyEndpoint, "applied by the decode leg"),
	both("include_stop_str_in_output", AnyEndpoint, "shapes the decode leg's output"),
	both("ignore_eos", AnyEndpoint, sampling),
	decodeOnly("min_tokens", AnyEndpoint, "the prefill leg runs max_tokens 1"),
	both("skip_special_tokens", AnyEndpoint, "shapes the decode leg's output"),
	both("spaces_between_special_tokens", AnyEndpoint, "shapes the decode leg's output"),
	both("truncate_prompt_tokens", AnyEndpoint, samePrompt),
	{Name: "prompt_logprobs", In: AnyEndpoint, Prefill: Forward, Decode: Forward, Refused: "always",
		Note: "vLLM refuses it on a stream and the decode leg always streams; the prefill leg's answer is not relayed"},
	both("allowed_token_ids", AnyEndpoint, sampling),
	both("bad_words", Chat, sampling),
	{Name: "echo", In: AnyEndpoint, Prefill: Forward, Decode: Forward, Refused: "true together with logprobs",
		Note: "echo with logprobs asks for the prompt's logprobs (as prompt_logprobs does)"},
	both("add_generation_prompt", Chat, samePrompt),
	both("continue_final_message", Chat, samePrompt),
	both("add_special_tokens", AnyEndpoint, samePrompt),
	both("documents", Chat, samePrompt),
	both("chat_template", Chat, samePrompt),
	both("chat_template_kwargs", Chat, samePrompt),
	both("mm_processor_kwargs", Chat, samePrompt),
	both("structured_outputs", AnyEndpoint, "constrains the output"),
	both("priority", AnyEndpoint, "each engine's own queue order"),
	both("request_id", AnyEndpoint, "vLLM names a request by its X-Request-Id header, which the router sets per leg; "+
		"the response's id is the router's request id"),
	both("logits_processors", AnyEndpoint, sampling),
	both("return_tokens_as_token_ids", AnyEndpoint, "shapes the decode leg's logprobs"),
	{Name: "return_token_ids", In: AnyEndpoint, Prefill: Forward, Decode: Own,
		Note: "true on the decode leg (the router counts tokens by id); the ids reach the client only when it asked"},
	both("cache_salt", AnyEndpoint, "both legs must key the prompt's KV alike"),
	{Name: "kv_transfer_params", In: AnyEndpoint, Prefill: Own, Decode: Own, Refused: "always",
		Note: "the router owns the KV handoff"},
	{Name: "vllm_xargs", In: AnyEndpoint, Prefill: Forward, Decode: Forward, Refused: "not an object, or setting kv_cache_report_mode, kv_transfer_params or ec_transfer_params",
		Note: "extension arguments reach both legs"},
	both("max_repetition_pattern_size", AnyEndpoint, "applied by the decode leg"),
	both("min_repetition_pattern_size", AnyEndpoint, "applied by the decode leg"),
	both("repetition_min_count", AnyEndpoint, "applied by the decode leg"),
	both("prompt", Completion, samePrompt),
	both("suffix", Completion, "vLLM refuses it itself"),
	{Name: "prompt_embeds", In: Completion, Prefill: Forward, Decode: Forward, Refused: "always",
		Note: "the router sizes, places and prices a request by its prompt tokens"},
}

// refusedAlways are the fields Validate refuses whenever they are set.
var refusedAlways = func() map[string]string {
	m := map[string]string{}
	for _, f := range Fields {
		if f.Refused == "always" {
			m[f.Name] = f.Note
		}
	}
	return m
}()

// FieldNames are the names of the fields an endpoint's model has.
func FieldNames(in Endpoint) []string {
	var out []string
	for _, f := range Fields {
		if f.In&in != 0 {
			out = append(out, f.Name)
		}
	}
	return out
}

package router

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	sdkresp "github.com/openai/openai-go/v3/responses"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// postPlain sends a request that is not a generation request: no journal
// row, so its answer is not noted for the harness's one-row-per-request
// check (and must carry no router request id).
func (h *harness) postPlain(path, body string) (int, []byte) {
	h.t.Helper()
	req, _ := http.NewRequestWithContext(ctx(h.t), http.MethodPost, h.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	if rid := resp.Header.Get("X-Narwhal-Request-Id"); rid != "" {
		h.t.Errorf("POST %s answered with request id %s: only generation requests have one (and a journal row)", path, rid)
	}
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// errorBody is the error body OpenAI's SDKs parse.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func parseError(t *testing.T, out []byte) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(out, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not an OpenAI error body: %s", out)
	}
	return e
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// /tokenize and /detokenize reach an engine through the router and come
// back exactly as the engine answers them, and the two round-trip.
func TestTokenizeDetokenizeRoundTripThroughRouter(t *testing.T) {
	h := newHarness(t, pd, nil)
	const text = "the quick brown fox, tokenized"
	body := `{"model":"` + model + `","prompt":"` + text + `"}`
	status, out := h.postPlain("/tokenize", body)
	if status != 200 {
		t.Fatalf("tokenize: %d %s", status, out)
	}
	want := direct(t, h.engines.Engines[0].URL(), "/tokenize", map[string]any{"model": model, "prompt": text})
	if !bytes.Equal(bytes.TrimSpace(out), bytes.TrimSpace(want)) {
		t.Errorf("tokenize through the router:\n%s\nstraight from the engine:\n%s", out, want)
	}
	var tok struct {
		Count  int     `json:"count"`
		Tokens []int64 `json:"tokens"`
	}
	if err := json.Unmarshal(out, &tok); err != nil || tok.Count == 0 || len(tok.Tokens) != tok.Count {
		t.Fatalf("tokenize answer %s: %v", out, err)
	}
	ids, _ := json.Marshal(tok.Tokens)
	status, out = h.postPlain("/detokenize", `{"model":"`+model+`","tokens":`+string(ids)+`}`)
	var detok struct {
		Prompt string `json:"prompt"`
	}
	if status != 200 || json.Unmarshal(out, &detok) != nil || detok.Prompt != text {
		t.Fatalf("detokenize: %d %s, want prompt %q", status, out, text)
	}
}

// What the router itself checks answers in OpenAI's shape with the field
// named; what only the engine knows comes back with the engine's status.
func TestTokenizeRefusals(t *testing.T) {
	h := newHarness(t, pd, nil)
	for _, tc := range []struct {
		name, path, body string
		status           int
		param, code      string
	}{
		{"other model", "/tokenize", `{"model":"gpt-4o","prompt":"x"}`, 404, "model", "model_not_found"},
		{"model not a string", "/tokenize", `{"model":7,"prompt":"x"}`, 400, "model", "invalid_type"},
		{"not an object", "/detokenize", `[1,2]`, 400, "<null>", "invalid_json"},
		{"engine refuses", "/detokenize", `{"tokens":[-1]}`, 400, "<null>", string(fault.EngineRejected)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := h.postPlain(tc.path, tc.body)
			e := parseError(t, out)
			if status != tc.status || deref(e.Error.Param) != tc.param || deref(e.Error.Code) != tc.code {
				t.Errorf("%d param %s code %s (%s), want %d param %s code %s", status, deref(e.Error.Param),
					deref(e.Error.Code), e.Error.Message, tc.status, tc.param, tc.code)
			}
		})
	}
}

// An engine whose /tokenize fails transiently costs the client nothing:
// the router asks the next live engine (serving.max_attempts is 2 here).
func TestTokenizeFailsOverOnTransientEngineError(t *testing.T) {
	h := newHarness(t, []fleet.Role{fleet.Prefill, fleet.Decode, fleet.Decode}, nil)
	asked := make(chan struct{}, 4)
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		asked <- struct{}{}
		w.WriteHeader(503)
	}))
	defer busy.Close()
	old := h.router.engines["d0"].client // the least-loaded engine at rest (iid order breaks the tie)
	h.router.engines["d0"].client = vllm.NewClient(busy.URL, vllm.Options{})
	defer func() { h.router.engines["d0"].client.Close(); h.router.engines["d0"].client = old }()
	status, out := h.postPlain("/tokenize", `{"prompt":"move me along"}`)
	if status != 200 {
		t.Fatalf("tokenize: %d %s; a 503 from one engine must move the call to a peer", status, out)
	}
	if len(asked) != 1 {
		t.Errorf("the failing engine was asked %d times, want 1", len(asked))
	}
}

// vLLM's pooling routes answer 404 in OpenAI's shape, saying this fleet
// serves generation; 404 so no SDK retries.
func TestPoolingRoutesAnswerNotServed(t *testing.T) {
	h := newHarness(t, pd, nil)
	for _, p := range []string{"/v1/embeddings", "/v1/score", "/v1/rerank", "/rerank", "/score", "/pooling", "/classify", "/v2/rerank"} {
		status, out := h.postPlain(p, `{"model":"`+model+`","input":"embed me"}`)
		e := parseError(t, out)
		if status != 404 || e.Error.Type != "invalid_request_error" || deref(e.Error.Code) != "pooling_not_served" ||
			!strings.Contains(e.Error.Message, "serves generation") || !strings.Contains(e.Error.Message, p) {
			t.Errorf("POST %s: %d %s", p, status, out)
		}
	}
}

// The stored-response routes vLLM serves answer 404 here, saying no
// responses are stored.
func TestStoredResponseRoutesAnswerNotFound(t *testing.T) {
	h := newHarness(t, pd, nil)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/responses/resp_1"}, {"DELETE", "/v1/responses/resp_1"},
		{"POST", "/v1/responses/resp_1/cancel"}, {"GET", "/v1/responses/resp_1/input_items"},
	} {
		req, _ := http.NewRequestWithContext(ctx(t), tc.method, h.srv.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e := parseError(t, out)
		if resp.StatusCode != 404 || deref(e.Error.Code) != "response_not_found" || !strings.Contains(e.Error.Message, "stores no responses") {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, resp.StatusCode, out)
		}
	}
}

// response is the part of a Response object the tests read.
type response struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	Status string `json:"status"`
	Model  string `json:"model"`
	Output []struct {
		ID      string `json:"id"`
		Type    string `json:"type"`
		Role    string `json:"role"`
		Status  string `json:"status"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
	Usage *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

func (r response) text() string {
	if len(r.Output) != 1 || len(r.Output[0].Content) != 1 {
		return "<not one message with one part>"
	}
	return r.Output[0].Content[0].Text
}

// chatText is the reference: the same conversation as one chat
// completion on one engine, without disaggregation.
func chatText(t *testing.T, url string, msgs []map[string]any, maxTokens int) (string, int) {
	t.Helper()
	out := direct(t, url, "/v1/chat/completions", map[string]any{"model": model, "messages": msgs, "max_tokens": maxTokens})
	var c struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(out, &c); err != nil || len(c.Choices) != 1 {
		t.Fatalf("reference chat: %s", out)
	}
	return c.Choices[0].Message.Content, c.Usage.PromptTokens
}

var responsesInputs = []struct {
	name string
	body map[string]any
	msgs []map[string]any // the chat conversation it means
}{
	{"text input", map[string]any{"input": "tell me about narwhals"},
		[]map[string]any{{"role": "user", "content": "tell me about narwhals"}}},
	{"message input", map[string]any{
		"instructions": "answer briefly",
		"input": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "tell me "}, map[string]any{"type": "input_text", "text": "about tusks"}}},
			map[string]any{"type": "message", "role": "assistant", "content": "they are teeth"},
			map[string]any{"role": "user", "content": "more"},
		}},
		[]map[string]any{{"role": "system", "content": "answer briefly"}, {"role": "user", "content": "tell me about tusks"},
			{"role": "assistant", "content": "they are teeth"}, {"role": "user", "content": "more"}}},
}

// A non-streamed Responses call runs in two legs like chat and answers
// with one Response object: the chat reference's text, usage, and the
// journal row of a chat call.
func TestResponsesNonStreaming(t *testing.T) {
	h := newHarness(t, pd, nil)
	for _, tc := range responsesInputs {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"model": model, "max_output_tokens": 6}
			for k, v := range tc.body {
				body[k] = v
			}
			resp, out := h.post(ctx(t), "/v1/responses", body)
			var r response
			if resp.StatusCode != 200 || json.Unmarshal(out, &r) != nil {
				t.Fatalf("%d %s", resp.StatusCode, out)
			}
			rid := resp.Header.Get("X-Narwhal-Request-Id")
			want, prompt := chatText(t, h.engines.Engines[1].URL(), tc.msgs, 6)
			if r.Object != "response" || r.ID != "resp_"+rid || r.Model != model || r.Status != "incomplete" ||
				r.Output[0].Type != "message" || r.Output[0].Role != "assistant" || r.Output[0].Content[0].Type != "output_text" {
				t.Errorf("response shape: %s", out)
			}
			if r.text() != want {
				t.Errorf("text %q, want the chat reference %q", r.text(), want)
			}
			if r.Usage == nil || r.Usage.InputTokens != prompt || r.Usage.OutputTokens != 6 || r.Usage.TotalTokens != prompt+6 {
				t.Errorf("usage %s, want %d in, 6 out", out, prompt)
			}
			row := h.row(rid)
			if row.Terminal != journal.TerminalCompleted || deref(row.PrefillIID) != "p0" || deref(row.DecodeIID) != "d0" ||
				row.OutputLen == nil || *row.OutputLen != 6 || !row.InputSized || row.TTFT == nil {
				t.Errorf("journal row %+v: want a completed two-leg chat row with 6 output tokens", row)
			}
		})
	}
}

// sseEvent is one "event:" / "data:" pair of a Responses stream.
type sseEvent struct {
	name string
	data map[string]any
}

func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var evs []sseEvent
	var name string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("event data %q: %v", line, err)
			}
			evs = append(evs, sseEvent{name, d})
			name = ""
		}
	}
	return evs
}

// A streamed Responses call emits vLLM's event sequence for text:
// created, in_progress, output_item.added, content_part.added, the text
// deltas, output_text.done, content_part.done, output_item.done,
// completed; numbered from 0, each framed with its type.
func TestResponsesStreaming(t *testing.T) {
	h := newHarness(t, pd, nil)
	for _, tc := range responsesInputs {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"model": model, "max_output_tokens": 5, "stream": true}
			for k, v := range tc.body {
				body[k] = v
			}
			b, _ := json.Marshal(body)
			req, _ := http.NewRequestWithContext(ctx(t), http.MethodPost, h.srv.URL+"/v1/responses", bytes.NewReader(b))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			h.noteRID(resp)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				out, _ := io.ReadAll(resp.Body)
				t.Fatalf("%d %s", resp.StatusCode, out)
			}
			evs := readSSE(t, resp.Body)
			checkResponseEvents(t, evs)
			want, _ := chatText(t, h.engines.Engines[1].URL(), tc.msgs, 5)
			var deltas string
			for _, ev := range evs {
				if ev.name == "response.output_text.delta" {
					deltas += ev.data["delta"].(string)
				}
			}
			last := evs[len(evs)-1].data["response"].(map[string]any)
			final := last["output"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]
			if deltas != want || final != want {
				t.Errorf("deltas %q, completed text %q; want the chat reference %q", deltas, final, want)
			}
			if u := last["usage"].(map[string]any); u["output_tokens"] != float64(5) {
				t.Errorf("completed usage %v, want 5 output tokens", u)
			}
			rid := resp.Header.Get("X-Narwhal-Request-Id")
			if row := h.row(rid); row.Terminal != journal.TerminalCompleted || row.DecodeIID == nil || deref(row.DecodeIID) != "d0" {
				t.Errorf("journal row %+v", row)
			}
		})
	}
}

// checkResponseEvents checks the order, names and numbering of a text
// Responses stream.
func checkResponseEvents(t *testing.T, evs []sseEvent) {
	t.Helper()
	var kinds []string
	for i, ev := range evs {
		if ev.data["type"] != ev.name {
			t.Errorf("event %d framed as %q carries type %v", i, ev.name, ev.data["type"])
		}
		if ev.data["sequence_number"] != float64(i) {
			t.Errorf("event %d (%s) has sequence_number %v", i, ev.name, ev.data["sequence_number"])
		}
		if k := ev.name; len(kinds) == 0 || kinds[len(kinds)-1] != k || k != "response.output_text.delta" {
			kinds = append(kinds, k)
		}
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.completed"}
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Fatalf("events\n%v\nwant\n%v", kinds, want)
	}
}

// What the Responses path cannot honour is refused 400 by name, before
// any leg runs, and journalled as an invalid request.
func TestResponsesRefusals(t *testing.T) {
	h := newHarness(t, pd, nil)
	for _, tc := range []struct {
		name  string
		body  map[string]any
		param string
	}{
		{"previous_response_id", map[string]any{"input": "hi", "previous_response_id": "resp_123"}, "previous_response_id"},
		{"store true", map[string]any{"input": "hi", "store": true}, "store"},
		{"tools", map[string]any{"input": "hi", "tools": []any{map[string]any{"type": "web_search"}}}, "tools"},
		{"background", map[string]any{"input": "hi", "background": true}, "background"},
		{"image part", map[string]any{"input": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "input_image", "image_url": "http://example.invalid/x.png"}}}}}, "input[0].content[0].type"},
		{"function call item", map[string]any{"input": []any{map[string]any{"type": "function_call_output", "call_id": "c", "output": "x"}}}, "input[0].type"},
		{"no input", map[string]any{}, "input"},
		{"max_output_tokens zero", map[string]any{"input": "hi", "max_output_tokens": 0}, "max_output_tokens"},
		{"wrong model", map[string]any{"input": "hi", "model": "gpt-4o"}, "model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, out := h.post(ctx(t), "/v1/responses", tc.body)
			e := parseError(t, out)
			if resp.StatusCode/100 != 4 || deref(e.Error.Param) != tc.param {
				t.Fatalf("%d param %s: %s; want a 4xx naming %s", resp.StatusCode, deref(e.Error.Param), out, tc.param)
			}
			row := h.row(resp.Header.Get("X-Narwhal-Request-Id"))
			if row.Terminal != journal.TerminalInvalid || row.PrefillIID != nil {
				t.Errorf("journal row %+v: want an invalid request with no leg", row)
			}
		})
	}
}

// The admission record names the route the client called, not the
// engines' chat route the legs use.
func TestResponsesAdmissionRecordsTheClientRoute(t *testing.T) {
	h := newHarness(t, pd, nil)
	resp, out := h.post(ctx(t), "/v1/responses", map[string]any{"model": model, "input": "hi", "max_output_tokens": 2})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	rid := resp.Header.Get("X-Narwhal-Request-Id")
	h.row(rid)
	j, err := journal.ReadFile(h.jpath)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range j.Admissions {
		if a.Admission.RID == rid {
			if a.Admission.Endpoint != responsesPath {
				t.Errorf("admission endpoint %q, want %q", a.Admission.Endpoint, responsesPath)
			}
			return
		}
	}
	t.Errorf("no admission record for %s", rid)
}

// sdkClient is OpenAI's Go SDK pointed at the router, noting every
// answer's request id for the harness's journal check. No retries: a
// retried request would hide a wrong status.
func (h *harness) sdkClient() sdk.Client {
	return sdk.NewClient(option.WithBaseURL(h.srv.URL+"/v1/"), option.WithAPIKey("unused-by-narwhal"), option.WithMaxRetries(0),
		option.WithMiddleware(func(q *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			resp, err := next(q)
			if err == nil {
				h.noteRID(resp)
			}
			return resp, err
		}))
}

// OpenAI's Go SDK (openai-go v3.102.0) creates a Response through the
// router, with a message-list input, and reads it as its own type.
func TestResponsesThroughTheGoSDK(t *testing.T) {
	h := newHarness(t, pd, nil)
	client := h.sdkClient()
	r, err := client.Responses.New(ctx(t), sdkresp.ResponseNewParams{
		Model:           model,
		Instructions:    sdk.String("answer briefly"),
		MaxOutputTokens: sdk.Int(6),
		Input: sdkresp.ResponseNewParamsInputUnion{OfInputItemList: sdkresp.ResponseInputParam{
			sdkresp.ResponseInputItemParamOfMessage("tell me about narwhals", sdkresp.EasyInputMessageRoleUser),
		}},
	})
	if err != nil {
		t.Fatalf("Responses.New: %v", err)
	}
	want, prompt := chatText(t, h.engines.Engines[1].URL(), []map[string]any{
		{"role": "system", "content": "answer briefly"}, {"role": "user", "content": "tell me about narwhals"}}, 6)
	if r.OutputText() != want || r.Status != sdkresp.ResponseStatusIncomplete || r.Usage.OutputTokens != 6 || r.Usage.InputTokens != int64(prompt) {
		t.Errorf("SDK read text %q status %s usage %+v; want %q, incomplete, %d in, 6 out", r.OutputText(), r.Status, r.Usage, want, prompt)
	}
	// A refusal reaches the SDK as an API error naming the field.
	_, err = client.Responses.New(ctx(t), sdkresp.ResponseNewParams{Model: model,
		Input: sdkresp.ResponseNewParamsInputUnion{OfString: sdk.String("hi")}, PreviousResponseID: sdk.String("resp_1")})
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "previous_response_id" {
		t.Errorf("previous_response_id: %v, want a 400 API error with param previous_response_id", err)
	}
}

// The Go SDK's streaming variant reads the router's Responses events as
// its own union type, to response.completed.
func TestResponsesStreamThroughTheGoSDK(t *testing.T) {
	h := newHarness(t, pd, nil)
	client := h.sdkClient()
	stream := client.Responses.NewStreaming(ctx(t), sdkresp.ResponseNewParams{
		Model: model, MaxOutputTokens: sdk.Int(5),
		Input: sdkresp.ResponseNewParamsInputUnion{OfString: sdk.String("tell me about narwhals")},
	})
	defer stream.Close()
	var kinds []string
	var deltas string
	var done sdkresp.Response
	for stream.Next() {
		ev := stream.Current()
		kinds = append(kinds, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			deltas += ev.Delta
		case "response.completed":
			done = ev.AsResponseCompleted().Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	want, _ := chatText(t, h.engines.Engines[1].URL(), []map[string]any{{"role": "user", "content": "tell me about narwhals"}}, 5)
	if deltas != want || done.OutputText() != want || done.Usage.OutputTokens != 5 {
		t.Errorf("SDK deltas %q, completed %q (usage %+v); want %q and 5 output tokens; events %v", deltas, done.OutputText(), done.Usage, want, kinds)
	}
	if len(kinds) < 9 || kinds[0] != "response.created" || kinds[len(kinds)-1] != "response.completed" {
		t.Errorf("events %v", kinds)
	}
}

// OpenAI's JavaScript SDK creates a Response through the router, plain
// and streamed through its ResponseStream accumulator
// (scripts/node/openai-responses.mjs). make node-deps installs the SDK.
func TestResponsesThroughTheJSSDK(t *testing.T) {
	node, dir := testkit.NodeSDK(t)
	script := filepath.Join(dir, "openai-responses.mjs")
	h := newHarness(t, pd, nil)
	// Every answer the script reads carries a request id with a journal
	// row; the script cannot report them, so the journal is read instead.
	out, err := exec.CommandContext(ctx(t), node, script, h.srv.URL+"/v1", model).CombinedOutput()
	if err != nil {
		t.Fatalf("the OpenAI JS SDK run failed: %v\n%s", err, out)
	}
	t.Logf("OpenAI JS SDK: %s", out)
	h.noteJournalRIDs(3)
}

// noteJournalRIDs notes the request ids of the journal's rows, for
// requests sent by a client the harness cannot see answers of; want is
// how many rows there must be.
func (h *harness) noteJournalRIDs(want int) {
	h.t.Helper()
	j, err := journal.ReadFile(h.jpath)
	if err != nil {
		h.t.Fatal(err)
	}
	if len(j.Requests) != want {
		h.t.Errorf("journal has %d rows, want %d", len(j.Requests), want)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range j.Requests {
		h.rids = append(h.rids, r.Request.RID)
	}
}

// A Responses stream whose decode engine dies after output started ends
// with one terminal error event, which the SDKs raise (data with an
// "error" key, as on chat), and a failed journal row with status 200.
func TestResponsesStreamFailureAfterOutput(t *testing.T) {
	h := newHarness(t, pd, nil)
	h.engines.Engines[1].SetFaults(simengine.Faults{DropAfterTokens: 2}) // d0 dies mid-stream
	client := h.sdkClient()
	stream := client.Responses.NewStreaming(ctx(t), sdkresp.ResponseNewParams{
		Model: model, MaxOutputTokens: sdk.Int(8),
		Input: sdkresp.ResponseNewParamsInputUnion{OfString: sdk.String("tell me about narwhals")},
	})
	defer stream.Close()
	var kinds []string
	for stream.Next() {
		kinds = append(kinds, stream.Current().Type)
	}
	err := stream.Err()
	if err == nil || !strings.Contains(err.Error(), "error") {
		t.Fatalf("stream ended with %v after %v; want the SDK to raise the router's error event", err, kinds)
	}
	if len(kinds) < 5 || kinds[0] != "response.created" || kinds[len(kinds)-1] != "response.output_text.delta" {
		t.Errorf("events before the failure: %v", kinds)
	}
	h.mu.Lock()
	rid := h.rids[len(h.rids)-1]
	h.mu.Unlock()
	if row := h.row(rid); row.Terminal != journal.TerminalFailed || row.Status == nil || *row.Status != 200 {
		t.Errorf("journal row %+v: want failed with status 200", row)
	}
}

package router

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// No retry storms, through the real SDKs at their default retries (2):
// an engine fault reaches the client only after the router placed the
// request again itself, with x-should-retry: false, so each call is one
// HTTP attempt whatever the engines do.

// The case: one engine answers 500 to every request. Every call
// is served (the router places the leg again on another engine) in one
// HTTP attempt. When every engine fails the router ejects them and
// answers 503 with a Retry-After, which the SDKs may retry: that answer
// costs no engine anything (TestAlways500EngineCostsAtMostTwoPrefills
// and TestPrefillFailureWithoutRetriesIs502 hold the engine side).
func TestGoSDKOneAttemptPerCallWhenAnEngineFails(t *testing.T) {
	for _, iid := range []int{0, 2} { // p0, then d0
		h := newHarness(t, ppdd, oneAttempt) // the router's own re-placement, not serving.max_attempts
		f := h.front()
		h.engines.Engines[iid].SetFaults(simengine.Faults{HTTP500Rate: 1})
		client := openai.NewClient(option.WithBaseURL(f.srv.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(2))
		const calls = 10
		for k := 0; k < calls; k++ {
			if _, err := client.Completions.New(ctx(t), openai.CompletionNewParams{Model: "sim-model", MaxTokens: openai.Int(2),
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("storm")}}); err != nil {
				t.Fatalf("engine %d failing, call %d: %v, want it served by a healthy engine", iid, k, err)
			}
		}
		if n := f.count("POST /v1/completions"); n != calls {
			t.Errorf("engine %d failing: %d HTTP attempts for %d calls, want one each", iid, n, calls)
		}
	}
}

func TestJSSDKOneAttemptPerCallWhenAnEngineFails(t *testing.T) {
	node, dir := testkit.NodeSDK(t)
	h := newHarness(t, ppdd, oneAttempt)
	f := h.front()
	h.engines.Engines[0].SetFaults(simengine.Faults{HTTP500Rate: 1}) // p0
	const script = `
import OpenAI from 'openai';
const client = new OpenAI({ baseURL: process.env.STORM_BASE, apiKey: 'unused', timeout: 20000 }); // maxRetries: the default 2
const statuses = [];
for (let i = 0; i < 10; i++) {
  try {
    await client.chat.completions.create({ model: 'sim-model', max_tokens: 2, messages: [{ role: 'user', content: 'storm ' + i }] });
    statuses.push(200);
  } catch (e) { statuses.push(e.status ?? 'none'); }
}
console.log(JSON.stringify({ statuses }));
`
	cctx, cancel := context.WithTimeout(ctx(t), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, node, "--input-type=module", "-e", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "STORM_BASE="+f.srv.URL+"/v1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got struct{ Statuses []any }
	if err := json.Unmarshal(out, &got); err != nil || len(got.Statuses) != 10 {
		t.Fatalf("JS SDK printed %s (%v)", out, err)
	}
	for k, s := range got.Statuses {
		if s != float64(200) {
			t.Errorf("call %d: %v, want served", k, s)
		}
	}
	if n := f.count("POST /v1/chat/completions"); n != 10 {
		t.Errorf("%d HTTP attempts for 10 calls, want one each", n)
	}
}

func oneAttempt(c *fleet.Config) { c.Serving.MaxAttempts = 1 }

// logprobs through the Go SDK: one entry per completion token, each with
// the asked number of alternatives.
func TestGoSDKReadsLogprobs(t *testing.T) {
	h := newHarness(t, pd, nil)
	client := openai.NewClient(option.WithBaseURL(h.front().srv.URL+"/v1/"), option.WithAPIKey("unused"))
	c, err := client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: "sim-model",
		MaxTokens: openai.Int(4), Logprobs: openai.Bool(true), TopLogprobs: openai.Int(2),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("logprobs please")}})
	if err != nil {
		t.Fatal(err)
	}
	lp := c.Choices[0].Logprobs.Content
	if len(lp) != int(c.Usage.CompletionTokens) || len(lp) == 0 {
		t.Fatalf("%d logprob entries for %d completion tokens", len(lp), c.Usage.CompletionTokens)
	}
	for k, e := range lp {
		if len(e.TopLogprobs) != 2 || e.Logprob > 0 {
			t.Errorf("entry %d: %d alternatives, logprob %v", k, len(e.TopLogprobs), e.Logprob)
		}
	}
}

// A burst through the Go SDK at its default retries: the router queues
// what it cannot place yet, so every call is served in one attempt.
func TestGoSDKBurstIsQueued(t *testing.T) {
	h := newHarness(t, ppdd, func(c *fleet.Config) { c.SLO.TTFT = 2 })
	f := h.front()
	client := openai.NewClient(option.WithBaseURL(f.srv.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(2))
	const calls = 100
	var wg sync.WaitGroup
	errs := make([]error, calls)
	for k := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[k] = client.Completions.New(ctx(t), openai.CompletionNewParams{Model: "sim-model", MaxTokens: openai.Int(4),
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("burst")}})
		}()
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	n := f.count("POST /v1/completions")
	t.Logf("%d concurrent calls: %d failed, %d HTTP attempts", calls, failed, n)
	if failed > 1 || float64(n) > 1.05*calls {
		t.Errorf("%d of %d calls failed, %d attempts; want at least 99 %% served and at most 1.05 attempts per call", failed, calls, n)
	}
}

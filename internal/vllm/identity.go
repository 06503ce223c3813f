package vllm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Identity is an engine process's generation as narwhal binds to it: the
// build (/version) and the process start (process_start_time_seconds on
// /metrics). A restart keeps the version and changes the start time.
type Identity struct {
	Version      string  `json:"vllm_version"`
	ProcessStart float64 `json:"process_start_time_seconds"`
}

// StartTolerance is how far two readings of one process's
// process_start_time_seconds may differ: the gauge is a float printed in
// text, so a re-read may differ in its last digits.
const StartTolerance = 1e-6

// SameBuild is the one "same build" rule: an engine whose /version is
// version runs the build want names (the fleet's build, a contract's
// vllm_version, an attested payload's version). Versions compare as
// strings, exactly: vLLM's NIXL compatibility hash covers vllm_version as
// a string (vllm-protocol.md §9.1), so 0.11.0 and 0.11.0+cu128 do not pair.
func SameBuild(version, want string) bool { return version == want }

// SameProcess reports whether id and o are one engine process: the same
// build and the same process start, within StartTolerance.
func (id Identity) SameProcess(o Identity) bool {
	return SameBuild(id.Version, o.Version) && SameStart(id.ProcessStart, o.ProcessStart)
}

// SameStart reports whether two process starts are one process's.
func SameStart(a, b float64) bool { return math.Abs(a-b) <= StartTolerance }

// Identity reads /version and then /metrics.
func (c *Client) Identity(ctx context.Context) (Identity, error) {
	v, e := c.Version(ctx)
	if e != nil {
		return Identity{}, e
	}
	t, e := c.ProcessStart(ctx)
	if e != nil {
		return Identity{}, e
	}
	return Identity{Version: v, ProcessStart: t}, nil
}

// ProcessStart scrapes GET /metrics for process_start_time_seconds.
func (c *Client) ProcessStart(ctx context.Context) (float64, error) {
	b, e := c.get(ctx, "/metrics", 32<<20)
	if e != nil {
		return 0, e
	}
	t, err := ParseProcessStart(bytes.NewReader(b))
	if err != nil {
		return 0, invalid(fault.Health, fault.ClassInferenceStatus, "/metrics: %v", err)
	}
	return t, nil
}

// ParseProcessStart finds process_start_time_seconds in a Prometheus text
// exposition: present, finite and positive, or an error saying which.
func ParseProcessStart(r io.Reader) (float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return 0, fmt.Errorf("not a Prometheus text exposition: %v", err)
	}
	f, ok := fams["process_start_time_seconds"]
	if !ok || len(f.GetMetric()) == 0 {
		return 0, fmt.Errorf("no process_start_time_seconds sample (the engine must export the process collector)")
	}
	m := f.GetMetric()[0]
	var v float64
	switch {
	case m.GetGauge() != nil:
		v = m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		v = m.GetUntyped().GetValue()
	case m.GetCounter() != nil:
		v = m.GetCounter().GetValue()
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return 0, fmt.Errorf("process_start_time_seconds is %v: want a finite positive time", v)
	}
	return v, nil
}

// Models lists the ids of GET /v1/models.
func (c *Client) Models(ctx context.Context) ([]string, error) {
	cards, e := c.ModelCards(ctx)
	if e != nil {
		return nil, e
	}
	ids := make([]string, len(cards))
	for i, m := range cards {
		ids[i] = m.ID
	}
	return ids, nil
}

// Completion is a non-streamed completion as probes read it.
type Completion struct {
	Text             string
	PromptTokens     int
	CompletionTokens int
	// CachedTokens is usage.prompt_tokens_details.cached_tokens: prompt
	// tokens the engine served from its prefix cache (0 when absent).
	CachedTokens int
}

// Complete runs a non-streamed POST /v1/completions (preflight's pace and
// aggregated reference runs).
func (c *Client) Complete(ctx context.Context, body []byte) (Completion, error) {
	req, err := c.newRequest(ctx, http.MethodPost, "/v1/completions", body, "")
	if err != nil {
		return Completion{}, &fault.Error{Phase: fault.Prefill, Reason: fault.EngineConnection, Class: fault.ClassConnection, Msg: err.Error()}
	}
	resp, e := c.do(fault.Prefill, req)
	if e != nil {
		return Completion{}, e
	}
	defer resp.Body.Close()
	b, e := readLimited(fault.Prefill, resp.Body, c.max)
	if e != nil {
		return Completion{}, e
	}
	var out struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			CompletionTokens    int `json:"completion_tokens"`
			PromptTokensDetails *struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) == 0 {
		return Completion{}, invalid(fault.Prefill, fault.ClassInferenceStatus, "completion response without choices")
	}
	c2 := Completion{Text: out.Choices[0].Text, PromptTokens: out.Usage.PromptTokens, CompletionTokens: out.Usage.CompletionTokens}
	if d := out.Usage.PromptTokensDetails; d != nil {
		c2.CachedTokens = d.CachedTokens
	}
	return c2, nil
}

// EventText is the generated text one stream event carries: completions'
// choices[].text or chat's delta.content, concatenated over choices.
func EventText(ev Event) string {
	var c struct {
		Choices []struct {
			Text  string `json:"text"`
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if ev.Done || ev.NotJSON || json.Unmarshal(ev.Data, &c) != nil {
		return ""
	}
	var b strings.Builder
	for _, ch := range c.Choices {
		b.WriteString(ch.Text)
		b.WriteString(ch.Delta.Content)
	}
	return b.String()
}

// get reads a whole 200 response of a GET control route.
func (c *Client) get(ctx context.Context, path string, limit int64) ([]byte, error) {
	return c.call(ctx, fault.Health, http.MethodGet, path, nil, "", limit)
}

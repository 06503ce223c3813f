// Package task runs an accepted task suite through the router and turns
// the outcomes into task evidence against the suite's quality floor
// (ADR-011: task evidence references the accepted suite and request that
// produced it). Scorers are exact, contains, regex and a JSON-schema
// subset; the P/D-equivalence suite compares every answer served through
// the router (disaggregated) with the same request served aggregated on
// one engine, greedy decoding.
//
// Records keep counts and case ids only, never prompts or answers
// (INV-26). Time reaches the package only through a ports.Clock.
package task

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/narwhal-go/narwhal/internal/evidence/decision"
)

// Target is where the suite runs: the router, and for P/D equivalence
// the one engine that serves the aggregated reference.
type Target struct {
	Router       string // router base URL
	RouterKey    string // client credential for the router, if it needs one
	Aggregated   string // engine base URL
	EngineKey    string // engine credential
	Client       *http.Client
	MaxBodyBytes int64
	Model        string // the fleet's model, for a suite whose model is "*"
}

// AnyModel is a suite model that runs against whatever the fleet serves.
const AnyModel = "*"

// Outcome is one case's result.
type Outcome struct {
	Case   string `json:"case"`
	Pass   bool   `json:"pass"`
	Reason string `json:"reason"`
}

// Run sends every case and scores it. A transport failure ends the run:
// an unreachable router is no task outcome.
func Run(ctx context.Context, s decision.Suite, t Target) ([]Outcome, error) {
	if t.Client == nil {
		t.Client = http.DefaultClient
	}
	if s.Model == AnyModel {
		s.Model = t.Model
	}
	out := make([]Outcome, 0, len(s.Cases))
	for _, c := range s.Cases {
		got, err := complete(ctx, t, t.Router, t.RouterKey, s.Model, c)
		if err != nil {
			return nil, fmt.Errorf("case %s through the router %s: %w", c.ID, t.Router, err)
		}
		want := c.Expected
		if s.Kind == decision.SuitePDEquivalence {
			if want, err = complete(ctx, t, t.Aggregated, t.EngineKey, s.Model, c); err != nil {
				return nil, fmt.Errorf("case %s aggregated on %s: %w", c.ID, t.Aggregated, err)
			}
		}
		pass, reason := Score(c, got, want)
		out = append(out, Outcome{Case: c.ID, Pass: pass, Reason: reason})
	}
	return out, nil
}

type completion struct {
	Choices []struct {
		Text string `json:"text"`
	} `json:"choices"`
}

// complete asks base for a greedy, non-streaming completion.
func complete(ctx context.Context, t Target, base, key, model string, c decision.Case) (string, error) {
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": c.Prompt, "max_tokens": c.MaxTokens, "temperature": 0, "stream": false})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := t.Client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	limit := t.MaxBodyBytes
	if limit <= 0 {
		limit = 4 << 20
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(raw[:min(len(raw), 240)])))
	}
	var cr completion
	if err := json.Unmarshal(raw, &cr); err != nil || len(cr.Choices) == 0 {
		return "", fmt.Errorf("not a completion response (%v)", err)
	}
	return cr.Choices[0].Text, nil
}

// Score judges one answer. want is the expected text, pattern, or the
// aggregated answer for equal_aggregated.
func Score(c decision.Case, got, want string) (bool, string) {
	switch c.Scorer {
	case decision.ScoreExact, decision.ScoreEqual:
		if got == want {
			return true, "equal"
		}
		return false, fmt.Sprintf("differs (%d vs %d bytes)", len(got), len(want))
	case decision.ScoreContains:
		return strings.Contains(got, want), "contains expected: " + fmt.Sprint(strings.Contains(got, want))
	case decision.ScoreRegex:
		re, err := regexp.Compile(want)
		if err != nil {
			return false, "bad pattern: " + err.Error()
		}
		return re.MatchString(got), "matches pattern: " + fmt.Sprint(re.MatchString(got))
	case decision.ScoreJSONSchema:
		var v any
		if err := json.Unmarshal([]byte(strings.TrimSpace(got)), &v); err != nil {
			return false, "answer is not JSON"
		}
		if err := validate(c.Schema, v, "$"); err != nil {
			return false, err.Error()
		}
		return true, "matches schema"
	}
	return false, "unknown scorer " + c.Scorer
}

// validate checks v against the schema subset (type, required,
// properties, enum).
func validate(s *decision.JSONSchema, v any, path string) error {
	if s == nil {
		return nil
	}
	if s.Type != "" && typeOf(v) != s.Type && !(s.Type == "number" && typeOf(v) == "integer") {
		return fmt.Errorf("%s: type %s, want %s", path, typeOf(v), s.Type)
	}
	if len(s.Enum) > 0 {
		str, _ := v.(string)
		if !contains(s.Enum, str) {
			return fmt.Errorf("%s: %v not in enum", path, v)
		}
	}
	obj, _ := v.(map[string]any)
	for _, k := range s.Required {
		if _, ok := obj[k]; !ok {
			return fmt.Errorf("%s: required %q missing", path, k)
		}
	}
	for k, sub := range s.Properties {
		if x, ok := obj[k]; ok {
			if err := validate(sub, x, path+"."+k); err != nil {
				return err
			}
		}
	}
	return nil
}

func typeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	}
	return "object"
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

//go:embed pd_equivalence.suite.json
var pdEquivalence []byte

// PDEquivalence is the shipped P/D-equivalence suite: meaningful on any
// fleet, simulated or real, because it needs no expected answers — the
// aggregated answer is the expectation. Its model "*" means the fleet's.
func PDEquivalence() []byte { return append([]byte(nil), pdEquivalence...) }

package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// completionBody is what every request sends: the exact output length
// (min_tokens = max_tokens, ignore_eos) so the request's cost is the
// schedule's, streamed with usage so the client can check the count.
type completionBody struct {
	Model         string        `json:"model"`
	Prompt        string        `json:"prompt"`
	MaxTokens     int           `json:"max_tokens"`
	MinTokens     int           `json:"min_tokens"`
	IgnoreEOS     bool          `json:"ignore_eos"`
	Temperature   float64       `json:"temperature"`
	Stream        bool          `json:"stream"`
	StreamOptions streamOptions `json:"stream_options"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chunk is the part of a streamed completion chunk the client reads.
type chunk struct {
	Choices []struct {
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// openAIError is OpenAI's error shape, as the router answers refusals.
type openAIError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	} `json:"error"`
}

// Prompt is a text of about n tokens: a salt word that keeps runs and
// requests apart in the prefix cache, then n−1 four-byte words (one
// token each on the simulated engines' tokenizer; real tokenizers count
// differently, and the journal's input_len is then the truth).
func Prompt(salt string, n int) string {
	var b strings.Builder
	b.Grow(4*n + len(salt))
	b.WriteString(salt)
	for i := 1; i < n; i++ {
		b.WriteString(" tok")
	}
	return b.String()
}

// do sends one request, retrying as OpenAI's SDKs would (retry.go), and
// fills rec from the client's view of the last attempt: status, error
// code, TTFT (first send → first token), TPOT ((last − first token) /
// (tokens − 1)), end-to-end time, and the attempts made.
func (g *Generator) do(ctx context.Context, rec *Record, body []byte) {
	start := time.Now()
	for n := 0; ; n++ {
		rec.Attempts = n + 1
		h, retry := g.once(ctx, rec, body, start)
		if !retry || n >= g.cfg.MaxRetries || ctx.Err() != nil {
			return
		}
		g.mu.Lock()
		wait := retryWait(h, n, g.rng)
		g.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		*rec = Record{Kind: rec.Kind, ID: rec.ID, Step: rec.Step, ScheduledS: rec.ScheduledS, SentS: rec.SentS,
			InputLen: rec.InputLen, WantedLen: rec.WantedLen, ScheduleLag: rec.ScheduleLag, Attempts: rec.Attempts}
	}
}

// once is one HTTP attempt. It returns the answer's headers (nil after a
// connection error) and whether an SDK would try again.
func (g *Generator) once(ctx context.Context, rec *Record, body []byte, start time.Time) (http.Header, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.cfg.Router+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		rec.Outcome, rec.Error = OutcomeTransportError, err.Error()
		return nil, false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", rec.ID)
	resp, err := g.client.Do(req)
	if err != nil {
		rec.Outcome, rec.Error = failure(ctx, err), oneLine(err.Error())
		return nil, ctx.Err() == nil
	}
	defer resp.Body.Close()
	rec.Status, rec.RouterRID = resp.StatusCode, resp.Header.Get("X-Narwhal-Request-Id")
	if resp.StatusCode != http.StatusOK {
		readError(rec, resp.Body)
		setE2E(rec, start)
		return resp.Header, shouldRetry(resp.StatusCode, resp.Header)
	}
	g.readStream(ctx, rec, resp.Body, start)
	setE2E(rec, start)
	return nil, false
}

func setE2E(rec *Record, start time.Time) {
	rec.E2E = ptr(time.Since(start).Seconds())
}

func failure(ctx context.Context, err error) string {
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return OutcomeTimeout
	}
	return OutcomeTransportError
}

func readError(rec *Record, body io.Reader) {
	rec.Outcome = OutcomeHTTPError
	b, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	var e openAIError
	if json.Unmarshal(b, &e) == nil {
		rec.ErrorType, rec.Error = e.Error.Type, oneLine(e.Error.Message)
		if e.Error.Code != nil {
			rec.ErrorCode = fmt.Sprint(e.Error.Code)
		}
	}
}

// readStream reads the SSE body: every data chunk with a choice is output
// (one or more tokens), the usage chunk gives the count, [DONE] ends it.
func (g *Generator) readStream(ctx context.Context, rec *Record, body io.Reader, start time.Time) {
	br := bufio.NewReaderSize(body, 4096)
	var first, last time.Time
	chunks, done := 0, false
	for !done {
		line, err := br.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			rec.Outcome, rec.Error = streamFailure(ctx, err), oneLine(err.Error())
			break
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data: "))
		if !ok {
			continue
		}
		if bytes.Equal(data, []byte("[DONE]")) {
			done = true
			break
		}
		var c chunk
		if json.Unmarshal(data, &c) != nil {
			rec.Outcome, rec.Error = OutcomeInvalidStream, "a data line is not JSON"
			break
		}
		if c.Usage != nil {
			rec.OutputLen = c.Usage.CompletionTokens
		}
		if len(c.Choices) > 0 && (c.Choices[0].Text != "" || c.Choices[0].FinishReason == nil) {
			now := time.Now()
			if chunks == 0 {
				first = now
			}
			last, chunks = now, chunks+1
		}
	}
	finishStream(rec, done, chunks, start, first, last)
}

func finishStream(rec *Record, done bool, chunks int, start, first, last time.Time) {
	if rec.OutputLen == 0 {
		rec.OutputLen = chunks
	}
	if chunks > 0 {
		rec.TTFT = ptr(first.Sub(start).Seconds())
	}
	if rec.OutputLen > 1 && chunks > 1 {
		rec.TPOT = ptr(last.Sub(first).Seconds() / float64(rec.OutputLen-1))
	}
	switch {
	case !done && rec.Outcome != "":
	case !done:
		rec.Outcome = OutcomeInvalidStream
	case rec.OutputLen < rec.WantedLen:
		rec.Outcome, rec.Error = OutcomeInvalidStream, fmt.Sprintf("%d of %d tokens before [DONE]", rec.OutputLen, rec.WantedLen)
	default:
		rec.Outcome = OutcomeCompleted
	}
}

func streamFailure(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return OutcomeTimeout
	}
	if errors.Is(err, io.EOF) {
		return OutcomeInvalidStream
	}
	return OutcomeTransportError
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 240 {
		s = s[:240]
	}
	return s
}

func ptr[T any](v T) *T { return &v }

package vllm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/narwhal-go/narwhal/internal/fault"
)

// Event is one SSE data payload of a decode stream.
type Event struct {
	Data   []byte // the payload as received (after "data: ")
	Done   bool   // the [DONE] terminator
	Tokens int    // generated tokens this event carries (from token_ids)
	// Output is true when the event carries generated output: text,
	// reasoning, tool calls or a refusal.
	Output bool
	// FinishReason is the last non-null finish_reason in the event.
	FinishReason string
	// Usage is the event's usage object when it has one.
	Usage json.RawMessage
	// NotJSON marks a payload that did not parse; it is relayed as is and
	// counts no tokens.
	NotJSON bool
}

// streamChunk is the part of a completion or chat chunk the router reads.
type streamChunk struct {
	Error *struct {
		Message string
		Type    string
		Code    json.RawMessage
	} `json:"error"`
	Usage   json.RawMessage `json:"usage"`
	Choices []struct {
		Text         *string          `json:"text"`
		TokenIDs     json.RawMessage  `json:"token_ids"`
		FinishReason *string          `json:"finish_reason"`
		Delta        *json.RawMessage `json:"delta"`
	} `json:"choices"`
}

type chatDelta struct {
	Content          *string         `json:"content"`
	Reasoning        *string         `json:"reasoning"`
	ReasoningContent *string         `json:"reasoning_content"`
	Refusal          *string         `json:"refusal"`
	ToolCalls        json.RawMessage `json:"tool_calls"`
}

// lineReader splits SSE lines on CRLF, CR or LF. Engines end lines with
// LF, so that path reads whole slices; a bare CR splits the slice.
type lineReader struct {
	r       *bufio.Reader
	pending []byte // the rest of a slice after a bare CR
	buf     []byte
}

func (l *lineReader) next() ([]byte, error) {
	if l.pending == nil {
		line, err := l.r.ReadSlice('\n')
		switch {
		case err == bufio.ErrBufferFull:
			// A line longer than the buffer: collect it.
			l.buf = append(l.buf[:0], line...)
			for err == bufio.ErrBufferFull {
				line, err = l.r.ReadSlice('\n')
				l.buf = append(l.buf, line...)
			}
			line = l.buf
		case err != nil && len(line) > 0 && errors.Is(err, io.EOF):
			return nil, io.ErrUnexpectedEOF // a line cut off mid-way
		}
		if err != nil && err != bufio.ErrBufferFull {
			return nil, err
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		// pending points into the reader's buffer, valid until the next
		// ReadSlice, which only happens once pending is used up.
		l.pending = line
	}
	// Split off the next line at a CR (CRLF became CR once LF was cut).
	if i := bytes.IndexByte(l.pending, '\r'); i >= 0 {
		line := l.pending[:i]
		l.pending = l.pending[i+1:]
		if len(l.pending) == 0 {
			l.pending = nil
		}
		return line, nil
	}
	line := l.pending
	l.pending = nil
	return line, nil
}

// dataBuffered reports that a whole data line is already in the buffer, so
// the next read of an event will not wait on the engine. Lines before it
// (the blank line ending an event, comments) are passed over; anything
// unusual (a pending bare-CR split) answers false, which only costs a
// flush.
func (l *lineReader) dataBuffered() bool {
	if l.pending != nil {
		return false
	}
	buf, _ := l.r.Peek(l.r.Buffered())
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			return false
		}
		if bytes.HasPrefix(buf, []byte("data:")) {
			return true
		}
		buf = buf[i+1:]
	}
}

// parseEvent reads one data payload. An error object inside a 200 stream is
// the engine failing after it committed to success.
func parseEvent(data []byte) (Event, error) {
	if bytes.Equal(data, []byte("[DONE]")) {
		return Event{Data: data, Done: true}, nil
	}
	if ev, ok := fastEvent(data); ok {
		return ev, nil
	}
	return decodeEvent(data)
}

// decodeEvent is parseEvent for the chunks the scanner leaves alone: errors,
// malformed input and unusual shapes.
func decodeEvent(data []byte) (Event, error) {
	ev := Event{Data: data}
	var c streamChunk
	if err := json.Unmarshal(data, &c); err != nil {
		ev.NotJSON = true
		return ev, nil
	}
	if c.Error != nil {
		status := 500
		var code int
		if json.Unmarshal(c.Error.Code, &code) == nil && code >= 400 && code <= 599 {
			status = code
		}
		e := statusError(fault.Decode, status, c.Error.Message)
		e.Class = "stream"
		e.Msg = "engine reported an error inside the stream: " + truncate(c.Error.Message, 200)
		return ev, e
	}
	if len(c.Usage) > 0 && !bytes.Equal(c.Usage, []byte("null")) {
		ev.Usage = c.Usage
	}
	for _, ch := range c.Choices {
		if ch.FinishReason != nil {
			ev.FinishReason = *ch.FinishReason
		}
		out, err := choiceHasOutput(ch.Text, ch.Delta)
		if err != nil {
			return ev, invalid(fault.Decode, fault.ClassStream, "malformed chat delta: %v", err)
		}
		n, ok := countIDs(ch.TokenIDs)
		if out && !ok {
			return ev, invalid(fault.Decode, fault.ClassStream, "an event with output carries no valid token_ids list")
		}
		ev.Output = ev.Output || out
		ev.Tokens += n
	}
	return ev, nil
}

func choiceHasOutput(text *string, delta *json.RawMessage) (bool, error) {
	if text != nil && *text != "" {
		return true, nil
	}
	if delta == nil {
		return false, nil
	}
	var d chatDelta
	if err := json.Unmarshal(*delta, &d); err != nil {
		return false, err
	}
	nonEmpty := func(s *string) bool { return s != nil && *s != "" }
	calls := len(d.ToolCalls) > 0 && !bytes.Equal(d.ToolCalls, []byte("null")) && !bytes.Equal(d.ToolCalls, []byte("[]"))
	return nonEmpty(d.Content) || nonEmpty(d.Reasoning) || nonEmpty(d.ReasoningContent) || nonEmpty(d.Refusal) || calls, nil
}

// countIDs validates a token_ids list: non-negative integers, no booleans.
func countIDs(raw json.RawMessage) (int, bool) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return 0, false
	}
	var ids []json.Number
	if !decodeNumbers(raw, &ids) || ids == nil {
		return 0, false
	}
	if !allIDs(ids) && len(ids) > 0 {
		return 0, false
	}
	return len(ids), true
}

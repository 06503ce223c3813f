package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parseDocument is stage 1: bytes to a generic JSON value whose numbers
// keep their literal text, so an int can be told from 5.0.
func parseDocument(data []byte) (any, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("invalid JSON: the file is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, describeSyntax(data, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("invalid JSON: unexpected content after the top-level value at byte %d", dec.InputOffset())
	}
	return v, nil
}

// describeSyntax turns a decoder error into the loader's message, naming
// NaN and Infinity when that is what the parser tripped on.
func describeSyntax(data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		rest := data[se.Offset-1:]
		if se.Offset == 0 {
			rest = data
		}
		for _, c := range []string{"-Infinity", "Infinity", "NaN"} {
			if bytes.HasPrefix(rest, []byte(c)) || bytes.HasPrefix(data[max(0, int(se.Offset)-2):], []byte(c)) {
				return fmt.Errorf("non-finite JSON constant %s", c)
			}
		}
		line, col := position(data, se.Offset)
		return fmt.Errorf("invalid JSON: %s at line %d, column %d", err.Error(), line, col)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("invalid JSON: unexpected end of input")
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

func position(data []byte, off int64) (line, col int) {
	line, col = 1, 1
	for i := 0; i < len(data) && int64(i) < off-1; i++ {
		if data[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// JSON kinds as the loader sees them.

// asInt reports v as an int when it is an int literal that fits in int64.
func asInt(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok || strings.ContainsAny(string(n), ".eE") {
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return 0, false
	}
	return int(i), true
}

// asNumber reports v as a float64 for any number literal; finite is false
// for a literal that overflows float64.
func asNumber(v any) (f float64, isNumber, finite bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, true, false
	}
	return f, true, true
}

// jsonText renders a value for a message: strings single-quoted, the rest
// as JSON text.
func jsonText(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case string:
		return "'" + t + "'"
	case json.Number:
		return string(t)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// num prints a float the Go way: 0, 0.5, 600, 1e-05.
func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// duplicateKeys reports every key that appears more than once in one
// object, anywhere in the document, once per object and key, with its
// path. data has already parsed, so the token stream holds no errors; a
// key is compared decoded, so "iid" and "\u0069id" are the same key.
func duplicateKeys(data []byte, ps *problems) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	_ = walkDuplicates(dec, "", ps)
}

func walkDuplicates(dec *json.Decoder, path string, ps *problems) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]int{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			field := key
			if path != "" {
				field = path + "." + key
			}
			seen[key]++
			if seen[key] == 2 {
				ps.add(field, "%s appears more than once in one object; keep one (a reader would silently use the last)", field)
			}
			if err := walkDuplicates(dec, field, ps); err != nil {
				return err
			}
		}
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := walkDuplicates(dec, path+"["+strconv.Itoa(i)+"]", ps); err != nil {
				return err
			}
		}
	default:
		return nil // a scalar
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

package check

import "encoding/json"

func raw(v any) json.RawMessage { return json.RawMessage(mustJSON(v)) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

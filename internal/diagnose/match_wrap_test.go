package diagnose

import (
	"strings"
	"testing"
)

// The V1 KV message as vLLM prints it on one line (the wording of
// vllm/v1/core/kv_cache_utils.py; the figures of the real log in
// https://github.com/lemonade-sdk/vllm-rocm/issues/5), cut the ways a
// paste or a terminal cuts it.
const kvMsgHead = `(EngineCore pid=42521) ERROR 06-09 14:01:52 [core.py:1136] ValueError: `
const kvMsg = `To serve at least one request with the models's max seq len (131072), (4.11 GiB KV cache is needed, which is larger than the available KV cache memory (4.0 GiB). Based on the available memory, the estimated maximum model length is 127776. Try increasing ` + "`gpu_memory_utilization`" + ` or decreasing ` + "`max_model_len`" + ` when initializing the engine.`

// cutAt splits s before each offset into lines.
func cutAt(s string, eatSpace bool, at ...int) string {
	var b strings.Builder
	prev := 0
	for _, i := range at {
		b.WriteString(s[prev:i])
		b.WriteByte('\n')
		prev = i
		if eatSpace && s[i] == ' ' {
			prev = i + 1
		}
	}
	b.WriteString(s[prev:])
	return b.String()
}

func TestWrappedMessages(t *testing.T) {
	idx := func(sub string) int { return strings.Index(kvMsg, sub) }
	for _, c := range []struct {
		name    string
		log     string
		family  Family
		maxLen  int64
		availGi float64
	}{
		{"one line", kvMsgHead + kvMsg, FamilyOOMKVCache, 131072, 4.0},
		{"cut mid-word, three lines", kvMsgHead + cutAt(kvMsg, false, idx("ed, which"), idx("ble KV cache memory")), FamilyOOMKVCache, 131072, 4.0},
		{"cut mid-number", kvMsgHead + cutAt(kvMsg, false, idx(".11 GiB"), idx("emory (4.0")), FamilyOOMKVCache, 131072, 4.0},
		{"hard wrap that ate the spaces", kvMsgHead + cutAt(kvMsg, true, idx(" which is"), idx(" available KV"), idx(" Based")), FamilyOOMKVCache, 131072, 4.0},
		{"wrap that kept a leading space", kvMsgHead + cutAt(kvMsg, false, idx(" cache is needed")), FamilyOOMKVCache, 131072, 4.0},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := diagnoseString(t, c.log)
			if d.Family != c.family || d.Wording != WordV1KVNeeded {
				t.Fatalf("family %s wording %s, want %s %s", d.Family, d.Wording, c.family, WordV1KVNeeded)
			}
			if f := d.Facts.MaxModelLen; f == nil || *f != c.maxLen {
				t.Errorf("max_model_len %v, want %d", f, c.maxLen)
			}
			if f := d.Facts.KVAvailableBytes; f == nil || *f != int64(c.availGi*(1<<30)) {
				t.Errorf("kv_available_bytes %v, want %.2f GiB", f, c.availGi)
			}
		})
	}
}

// A bare line joins only the message right before it: code, another
// process's line or a fresh header ends the message.
func TestWrapDoesNotJoinAcrossCode(t *testing.T) {
	head, tail, _ := strings.Cut(kvMsg, "KV cache is needed")
	for _, c := range []struct{ name, log string }{
		{"traceback code between", kvMsgHead + head + "\nTraceback (most recent call last):\n  File \"/x/vllm/v1/engine/core.py\", line 1, in f\n    raise X\nKV cache is needed" + tail},
		{"indented line", kvMsgHead + head + "\n    KV cache is needed" + tail},
		{"headed line", kvMsgHead + head + "\nINFO 06-09 14:01:53 [core.py:1] KV cache is needed" + tail},
		{"short previous line", "ERROR x: (4 GiB\nKV cache is needed" + tail},
	} {
		t.Run(c.name, func(t *testing.T) {
			if d := diagnoseString(t, c.log); d.Wording == WordV1KVNeeded {
				t.Errorf("joined across a boundary: %+v", d.Wording)
			}
		})
	}
}

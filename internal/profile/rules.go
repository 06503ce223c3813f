package profile

import "fmt"

// Limits are the fleet's profile acceptance limits (profiles.max_decode_*).
type Limits struct {
	MaxDecodeFitMAPE float64
	MaxDecodeCVMAPE  float64
}

// Problems lists why a row cannot price traffic: a decode domain that does
// not span both axes, or fit errors over the fleet's limits. The profiler
// refuses to write such a row and preflight fails it, with these words.
func (r Row) Problems(l Limits) []string {
	var out []string
	if r.DecodeMinRequests == nil || r.DecodeMaxRequests == nil || *r.DecodeMinRequests == *r.DecodeMaxRequests {
		out = append(out, "decode domain does not span the request axis")
	}
	if r.DecodeMinKVTokens == nil || r.DecodeMaxKVTokens == nil || *r.DecodeMinKVTokens == *r.DecodeMaxKVTokens {
		out = append(out, "decode domain does not span the KV-token axis")
	}
	if m := l.MaxDecodeFitMAPE; r.DecodeFitMAPE == nil || *r.DecodeFitMAPE > m {
		out = append(out, fmt.Sprintf("decode_fit_mape %v exceeds profiles.max_decode_fit_mape %v", derefStr(r.DecodeFitMAPE), m))
	}
	if m := l.MaxDecodeCVMAPE; r.DecodeCVMAPE == nil || *r.DecodeCVMAPE > m {
		out = append(out, fmt.Sprintf("decode_cv_mape %v exceeds profiles.max_decode_cv_mape %v", derefStr(r.DecodeCVMAPE), m))
	}
	return out
}

func derefStr(p *float64) string {
	if p == nil {
		return "(absent)"
	}
	return fmt.Sprint(*p)
}

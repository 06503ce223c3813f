package check

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/units"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// kvBlocked names the engines a pre-transfer gate failed on: KV must not
// move while any exists, because a stalled or incompatible transfer can
// hurt a healthy peer and a mismatched build corrupts output silently.
func (r *run) kvBlocked() []string {
	set := map[string]bool{}
	for iid := range r.slow {
		set[iid] = true
	}
	for iid := range r.incompatible {
		set[iid] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func (r *run) produce(ctx context.Context, g *Gate) {
	if r.o.NoKV {
		g.add(Skip, "", "produce and consume: --no-kv")
		return
	}
	if blocked := r.kvBlocked(); len(blocked) > 0 || r.contractFail {
		g.add(Skip, "", "produce and consume: pre-transfer gate failed on %s", orFleet(blocked))
		return
	}
	for _, e := range r.liveEngines() {
		if !CanProduce(e) {
			g.add(Skip, e.IID, "%s is pinned to decode", e.IID)
			continue
		}
		h, err := r.prefill(ctx, e.IID, r.o.IDs.NewID())
		if err != nil {
			g.add(Fail, e.IID, "%s prefill leg: %s", e.IID, err.Msg)
			r.kvTried[e.IID], r.kvFail[e.IID] = true, true
			continue
		}
		r.handoffs[e.IID] = true
		g.add(OK, e.IID, "%s returned kv_transfer_params %s", e.IID, strings.Join(paramKeys(h), ", "))
	}
	r.skipUnreachable(g)
}

func orFleet(iids []string) string {
	if len(iids) == 0 {
		return "the fleet (contract gate)"
	}
	return strings.Join(iids, ", ")
}

func paramKeys(h *vllm.Handoff) []string {
	var m map[string]any
	_ = jsonUnmarshal(h.Params, &m)
	keys := slices.Sorted(maps.Keys(m))
	return keys
}

func (r *run) consume(ctx context.Context, g *Gate) {
	if r.o.NoKV || len(r.kvBlocked()) > 0 || r.contractFail {
		g.add(Skip, "", "consume: no KV probes (see produce)")
		return
	}
	var eligible []fleet.Engine
	for _, e := range r.liveEngines() {
		if r.handoffs[e.IID] || (!CanProduce(e) && CanConsume(e)) {
			eligible = append(eligible, e)
		}
	}
	if len(r.handoffs) < 1 || len(eligible) < 2 {
		g.add(Skip, "", "consume needs 2 engines that passed produce or take decode")
		return
	}
	pairs := Mesh(eligible)
	if r.o.Ring {
		pairs = Ring(eligible)
	}
	if n := len(eligible)*(len(eligible)-1) - len(Mesh(eligible)); n > 0 {
		g.add(OK, "", "%d pair(s) excluded by role pins", n)
	}
	for _, p := range pairs {
		for i := 0; i < r.o.Repeats; i++ {
			r.probePair(ctx, g, p)
		}
	}
}

// probePair moves KV from p.Src to p.Dst and compares the decoded text
// with an aggregated run of the same prompt on p.Dst.
func (r *run) probePair(ctx context.Context, g *Gate, p Pair) {
	name := p.Src + " -> " + p.Dst
	r.kvTried[p.Src], r.kvTried[p.Dst] = true, true
	res, kind, err := r.transfer(ctx, p)
	if err != nil {
		g.Lines = append(g.Lines, Line{Status: Fail, Engine: name, Message: name + ": " + err.Error(), FailureKind: kind})
		r.kvFail[p.Src], r.kvFail[p.Dst] = true, true
		return
	}
	g.add(OK, name, "%s moved KV and produced %d tokens, first token %.3fs, text equals an aggregated run", name, res.tokens, res.first)
	r.kvOK[p.Src], r.kvOK[p.Dst] = true, true
}

type transferResult struct {
	tokens int
	first  float64
	text   string
}

// Failure kinds of a consume probe.
const (
	KindFirstTokenDeadline = "deadline_exceeded"
	KindRequestDeadline    = "request_deadline_exceeded"
	KindTransferFailed     = "transfer_failed"
	KindNoTokens           = "no_tokens"
	KindOutputMismatch     = "output_mismatch"
)

func (r *run) probeBody(salt string) vllm.Body {
	return vllm.Body{"model": raw(r.cfg.Model), "prompt": raw(words(r.o.ProbeWords)), "max_tokens": raw(4),
		"min_tokens": raw(4), "ignore_eos": raw(true), "temperature": raw(0), "cache_salt": raw(salt)}
}

func (r *run) prefill(ctx context.Context, iid, salt string) (*vllm.Handoff, *vllm.Error) {
	ctx, cancel := context.WithTimeout(ctx, units.Seconds(r.cfg.Serving.PrefillTimeoutS))
	defer cancel()
	return r.clients[iid].Prefill(ctx, "/v1/completions", vllm.PrefillBody(r.probeBody(salt), r.cfg.Model), "preflight-"+salt)
}

func (r *run) transfer(ctx context.Context, p Pair) (transferResult, string, error) {
	reqTimeout := r.cfg.Serving.RequestTimeoutS
	ctx, cancel := context.WithTimeout(ctx, units.Seconds(reqTimeout))
	defer cancel()
	salt := r.o.IDs.NewID()
	h, verr := r.prefill(ctx, p.Src, salt)
	if verr != nil {
		return transferResult{}, KindTransferFailed, fmt.Errorf("prefill leg on %s: %s", p.Src, verr.Msg)
	}
	res, kind, err := r.decode(ctx, p.Dst, salt, h)
	if err != nil {
		if ctx.Err() != nil {
			return res, KindRequestDeadline, fmt.Errorf("request deadline %gs expired (serving.request_timeout_s)", reqTimeout)
		}
		return res, kind, err
	}
	agg, verr := r.clients[p.Dst].Complete(ctx, mustJSON(map[string]any{"model": r.cfg.Model, "prompt": words(r.o.ProbeWords),
		"max_tokens": 4, "min_tokens": 4, "ignore_eos": true, "temperature": 0, "cache_salt": r.o.IDs.NewID()}))
	if verr != nil {
		return res, KindTransferFailed, fmt.Errorf("aggregated reference run on %s: %s", p.Dst, verr.Msg)
	}
	if agg.Text != res.text {
		return res, KindOutputMismatch, fmt.Errorf("decoded text %q differs from an aggregated run's %q: the KV arrived corrupted; do not route this pair", res.text, agg.Text)
	}
	return res, "", nil
}

// decode opens the consumer leg and reads it to [DONE], with the first
// output bounded by max(first_token_timeout_s, health_timeout_s).
func (r *run) decode(ctx context.Context, dst, salt string, h *vllm.Handoff) (transferResult, string, error) {
	firstLimit := max(r.cfg.Engine.FirstTokenTimeoutS, r.cfg.Engine.HealthTimeoutS)
	start := time.Now()
	st, verr := r.clients[dst].OpenStream(ctx, "/v1/completions", vllm.DecodeBody(r.probeBody(salt), r.cfg.Model, h.Params), "preflight-"+salt)
	if verr != nil {
		return transferResult{}, KindTransferFailed, fmt.Errorf("decode leg on %s: %s", dst, verr.Msg)
	}
	defer st.Close()
	st.SetIdleTimeout(units.Seconds(firstLimit))
	var res transferResult
	var text strings.Builder
	for i := 0; i < 100000; i++ { // bounded: 4 tokens need a handful of events
		ev, e := st.Next()
		if e != nil {
			if e.Timeout && res.tokens == 0 {
				return res, KindFirstTokenDeadline, fmt.Errorf("first-token deadline %gs expired; transfer remains unconfirmed: run first-token calibration", firstLimit)
			}
			return res, KindTransferFailed, fmt.Errorf("decode leg on %s: %s", dst, e.Msg)
		}
		if ev.Done {
			break
		}
		if ev.Tokens > 0 && res.tokens == 0 {
			res.first = time.Since(start).Seconds()
			st.SetIdleTimeout(units.Seconds(r.cfg.Engine.DecodeReadTimeoutS))
		}
		res.tokens += ev.Tokens
		text.WriteString(vllm.EventText(ev))
	}
	res.text = text.String()
	if res.tokens == 0 {
		return res, KindNoTokens, errors.New("accepted the handoff and produced no tokens")
	}
	return res, "", nil
}

// servingVerified lists engines whose every KV probe passed (at least one).
func (r *run) servingVerified() []string {
	var out []string
	for iid := range r.kvTried {
		if r.kvOK[iid] && !r.kvFail[iid] {
			out = append(out, iid)
		}
	}
	sort.Strings(out)
	return out
}

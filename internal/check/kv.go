package check

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/probe"
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
		h, err := r.probes.Produce(ctx, e.IID, r.kvProbe())
		if err != nil {
			g.add(Fail, e.IID, "%s prefill leg: %s", e.IID, fault.Detail(err))
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
	res, err := r.probes.KVTransfer(ctx, p.Src, p.Dst, r.kvProbe())
	if err != nil {
		kind := probe.KindTransferFailed
		var te *probe.TransferError
		if errors.As(err, &te) {
			kind = te.Kind
		}
		g.Lines = append(g.Lines, Line{Status: Fail, Engine: name, Message: name + ": " + err.Error(), FailureKind: kind})
		r.kvFail[p.Src], r.kvFail[p.Dst] = true, true
		return
	}
	g.add(OK, name, "%s moved KV and produced %d tokens, first token %.3fs, text equals an aggregated run", name, res.Tokens, res.FirstToken.Seconds())
	r.kvOK[p.Src], r.kvOK[p.Dst] = true, true
}

// Failure kinds of a consume probe.
const (
	KindFirstTokenDeadline = probe.KindFirstTokenDeadline
	KindRequestDeadline    = probe.KindRequestDeadline
	KindTransferFailed     = probe.KindTransferFailed
	KindNoTokens           = probe.KindNoTokens
	KindOutputMismatch     = probe.KindOutputMismatch
)

// kvProbe is preflight's KV probe: --probe-words of "benchmark ", four
// tokens, checked against an aggregated run.
func (r *run) kvProbe() probe.Transfer {
	return probe.Transfer{Prompt: words(r.o.ProbeWords), Tokens: 4, Reference: true, Label: "preflight"}
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

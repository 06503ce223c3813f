package memory

import "fmt"

// kvLayout is the KV-cache layout of the model under one launch: per
// layer bytes per token on a rank, the layer groups of vLLM's KV cache
// manager and the block size.
type kvLayout struct {
	// PerTokenLayer is one layer's KV bytes per token on one rank (every
	// attention layer of the implemented mechanisms has the same).
	PerTokenLayer int64
	BlockSize     int64
	Groups        []kvGroup
	SlidingWindow int64
}

// kvGroup is one KV cache group: layers sharing a block table.
type kvGroup struct {
	Kind   LayerKind
	Layers []int64
}

// PageBytes is one block of one layer.
func (l kvLayout) PageBytes() int64 { return l.BlockSize * l.PerTokenLayer }

// kvBytesPerTokenLayer follows §3.5.3: dense 2 (or K+V head sizes) ×
// max(1, kv_heads / TP) heads × bytes; MLA one latent (kv_lora_rank +
// qk_rope_head_dim) per token, not split by TP.
func kvBytesPerTokenLayer(a ArchFacts, tp int, elem int64) (int64, error) {
	switch a.Mechanism {
	case MechMLA:
		return (a.MLA.KVLoraRank + a.MLA.QKRopeHeadDim) * elem, nil
	case MechDense, MechSlidingWindow, MechHybridSliding:
		kv, t := a.NumKVHeads, int64(tp)
		if kv >= t && kv%t != 0 || kv < t && t%kv != 0 {
			return 0, fmt.Errorf("num_key_value_heads %d and tp %d do not divide (vLLM refuses the split)", kv, tp)
		}
		return max(1, kv/t) * (a.HeadDim + a.HeadDimV) * elem, nil
	}
	return 0, fmt.Errorf("KV cache: mechanism %s is not implemented", a.Mechanism)
}

// kvGroups builds vLLM's KV cache groups. Without the hybrid manager, or
// when every layer has the same kind, all layers form one group (sliding
// layers mixed with full ones are then sized as full attention). With it,
// each kind's layers are cut into groups of the same size — the smallest
// kind's layer count, or the largest when that is below 1.5 × the
// smallest — taking layers[i::num_groups] so PP stages stay balanced.
func kvGroups(kinds []LayerKind, hybrid bool) []kvGroup {
	var full, sliding []int64
	for i, k := range kinds {
		if k == LayerSliding {
			sliding = append(sliding, int64(i))
		} else {
			full = append(full, int64(i))
		}
	}
	all := make([]int64, len(kinds))
	for i := range all {
		all[i] = int64(i)
	}
	switch {
	case len(sliding) == 0:
		return []kvGroup{{LayerFull, all}}
	case len(full) == 0:
		if hybrid {
			return []kvGroup{{LayerSliding, all}}
		}
		return []kvGroup{{LayerFull, all}}
	case !hybrid:
		return []kvGroup{{LayerFull, all}}
	}
	lo, hi := min(len(full), len(sliding)), max(len(full), len(sliding))
	size := lo
	if float64(hi) < float64(lo)*1.5 {
		size = hi
	}
	var out []kvGroup
	// vLLM orders groups by first appearance of each spec in layer order.
	types := []struct {
		kind   LayerKind
		layers []int64
	}{{LayerFull, full}, {LayerSliding, sliding}}
	if kinds[0] == LayerSliding {
		types[0], types[1] = types[1], types[0]
	}
	for _, ty := range types {
		n := (len(ty.layers) + size - 1) / size
		for i := range n {
			var g []int64
			for j := i; j < len(ty.layers); j += n {
				g = append(g, ty.layers[j])
			}
			out = append(out, kvGroup{ty.kind, g})
		}
	}
	return out
}

// stageGroupSize is the largest number of one group's layers on a stage:
// the stage's num_blocks divisor.
func stageGroupSize(groups []kvGroup, stage [2]int64) int64 {
	var best int64
	for _, g := range groups {
		var n int64
		for _, l := range g.Layers {
			if l >= stage[0] && l < stage[1] {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

// stageLayers is how many attention layers a stage holds.
func stageLayers(stage [2]int64) int64 { return stage[1] - stage[0] }

// numBlocks is vLLM's get_num_blocks: available // page // group size.
func (l kvLayout) numBlocks(available, groupSize int64) int64 {
	if available <= 0 || groupSize == 0 {
		return 0
	}
	return available / l.PageBytes() / groupSize
}

// tokens is vLLM's "GPU KV cache size": blocks // groups × block size.
func (l kvLayout) tokens(numBlocks int64) int64 {
	return numBlocks / int64(len(l.Groups)) * l.BlockSize
}

// groupPagesPerRequest is the pages one request at maxModelLen needs in a
// group: full attention every block of the context; sliding window the
// window plus a scheduled chunk, plus one block for misalignment.
func (l kvLayout) groupPagesPerRequest(g kvGroup, maxModelLen, maxBatched int64) int64 {
	if g.Kind == LayerSliding {
		n := min(l.SlidingWindow-1+maxBatched, maxModelLen)
		return ceilDiv(n, l.BlockSize) + 1
	}
	return ceilDiv(maxModelLen, l.BlockSize)
}

// blocksPerRequest is the blocks one request at maxModelLen takes across
// the groups (get_max_concurrency_for_kv_cache_config's divisor).
func (l kvLayout) blocksPerRequest(maxModelLen, maxBatched int64) int64 {
	var n int64
	for _, g := range l.Groups {
		n += l.groupPagesPerRequest(g, maxModelLen, maxBatched)
	}
	return n
}

// neededBytes is the KV memory one request at maxModelLen needs on a
// stage (_max_memory_usage_bytes_from_groups of the stage's groups).
func (l kvLayout) neededBytes(stage [2]int64, maxModelLen, maxBatched int64) int64 {
	gs := stageGroupSize(l.Groups, stage)
	if gs == 0 {
		return 0
	}
	// vLLM projects every global group onto the stage, empty ones
	// included, and sums all their pages.
	return gs * l.PageBytes() * l.blocksPerRequest(maxModelLen, maxBatched)
}

// maxFeasibleLen is the largest max_model_len in [1, limit] for which one
// request fits every stage's available memory (vLLM's binary search in
// _estimate_max_model_len_from_groups); 0 when not even one token fits.
func (l kvLayout) maxFeasibleLen(stages [][2]int64, available []int64, maxBatched, limit int64) int64 {
	fits := func(n int64) bool {
		for i, s := range stages {
			if l.neededBytes(s, n, maxBatched) > available[i] {
				return false
			}
		}
		return true
	}
	if limit < 1 || !fits(1) {
		return 0
	}
	lo, hi, best := int64(1), limit, int64(1)
	for lo <= hi {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			best, lo = mid, mid+1
		} else {
			hi = mid - 1
		}
	}
	return best
}

// kvBytesPerTokenStage is the stage's KV bytes per token with every layer
// counted as full attention (what a token costs before window savings).
func (l kvLayout) kvBytesPerTokenStage(stage [2]int64) int64 {
	return stageLayers(stage) * l.PerTokenLayer
}

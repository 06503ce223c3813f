package diagnose

// fieldID indexes the Facts fields while a scan collects candidates.
type fieldID uint8

const (
	fRequested fieldID = iota
	fFree
	fTotal
	fTried
	fWeights
	fKVAvailable
	fKVNeeded
	fGraph
	fPTAllocated
	fUtil
	fMaxLen
	fDerivedMaxLen
	fKVTokens
	fEstMaxLen
	fBlocks
	fCC
	fReqCC
	fGPU
	fDType
	fQuant
	fTP
	fPP
	fHeads
	fKVHeads
	fPort
	fHTTP
	fExit
	fSignal
	fExcClass
	fVersion
	fEra
	fArch
	fArchRegistered
	numFields
)

// fieldNames are the JSON names of the Facts fields, used in rejections.
var fieldNames = [numFields]Field{
	fRequested: "requested_memory_bytes", fFree: "free_memory_bytes", fTotal: "total_memory_bytes",
	fTried: "tried_to_allocate_bytes", fWeights: "weights_bytes", fKVAvailable: "kv_available_bytes",
	fKVNeeded: "kv_needed_bytes", fGraph: "cuda_graph_bytes", fPTAllocated: "pytorch_allocated_bytes",
	fUtil: "gpu_memory_utilization", fMaxLen: "max_model_len", fDerivedMaxLen: "derived_max_model_len",
	fKVTokens: "kv_capacity_tokens", fEstMaxLen: "estimated_max_model_len", fBlocks: "num_gpu_blocks",
	fCC: "compute_capability", fReqCC: "required_compute_capability", fGPU: "gpu", fDType: "dtype",
	fQuant: "quantization", fTP: "tensor_parallel_size", fPP: "pipeline_parallel_size",
	fHeads: "num_attention_heads", fKVHeads: "num_kv_heads", fPort: "port", fHTTP: "http_status",
	fExit: "exit_code", fSignal: "signal", fExcClass: "exception_class", fVersion: "engine_version",
	fEra: "engine_era", fArch: "architecture", fArchRegistered: "architecture_registered",
}

// val is one candidate value. text holds log text for enum and identifier
// candidates until sanitize validates it; it never leaves the package.
type val struct {
	set  bool
	line int
	i    int64
	f    float64
	cc   ComputeCapability
	ver  EngineVersion
	text string
}

// vals is a full set of candidates.
type vals [numFields]val

// overlay sets every field of o that is set on v.
func (v *vals) overlay(o *vals) {
	for i := range o {
		if o[i].set {
			v[i] = o[i]
		}
	}
}

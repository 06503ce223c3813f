package diagnose

import "fmt"

// ruleTable is every family's rule, in taxonomy order. A rule's version
// changes whenever what it computes changes; its fingerprint (and so any
// promotion) is tied to the version.
var ruleTable = []Rule{
	{ID: "kv_fit", Family: FamilyOOMKVCache, Version: 1, compute: ruleKVTooSmall,
		Strategy: "the largest max_model_len the reported KV memory holds; the gpu_memory_utilization that gives the needed KV; an fp8 KV cache when halving the element alone fits"},
	{ID: "kv_budget", Family: FamilyNoKVCacheMemory, Version: 1, compute: ruleNoKVMemory,
		Strategy: "the gpu_memory_utilization that turns the reported budget into one max_model_len request; enforce_eager when the version subtracts the graph estimate; smaller max_num_batched_tokens / max_num_seqs by the calculator's predicted saving"},
	{ID: "startup_free", Family: FamilyStartupFreeMemory, Version: 1, compute: ruleStartupFreeMemory,
		Strategy: "the largest gpu_memory_utilization the free memory covers (with the longest max_model_len that budget holds, by the calculator)"},
	{ID: "derived_len", Family: FamilyMaxModelLen, Version: 1, compute: ruleMaxModelLen,
		Strategy: "max_model_len = the model's derived limit"},
	{ID: "graph_capture", Family: FamilyOOMCUDAGraph, Version: 1, compute: ruleGraphCaptureOOM,
		Strategy: "enforce_eager; capture sizes up to half the largest; a gpu_memory_utilization lowered by what the failed allocation lacked"},
	{ID: "weights_fit", Family: FamilyOOMWeightLoad, Version: 1, compute: ruleWeightsOOM,
		Strategy: "the smallest larger tensor_parallel_size that divides the heads and fits by the calculator; load-time fp8; a quantized checkpoint (a different artifact)"},
	{ID: "arch_support", Family: FamilyUnsupportedArch, Version: 1, compute: ruleUnsupportedArch,
		Strategy: "no plan change: an engine version whose registry has the architecture"},
	{ID: "quant_kernel", Family: FamilyQuantCapability, Version: 1, compute: ruleQuantCapability,
		Strategy: "a kernel for the same checkpoint format that this compute capability runs (awq_marlin → awq, gptq_marlin → gptq)"},
	{ID: "bf16_half", Family: FamilyBF16Unsupported, Version: 1, compute: ruleBF16Unsupported,
		Strategy: "dtype half below compute capability 8.0; float32 when the calculator predicts it fits"},
	{ID: "fp16_bf16", Family: FamilyDTypeIncompatible, Version: 1, compute: ruleDTypeIncompatible,
		Strategy: "dtype bfloat16 on compute capability 8.0+, else float32 when it fits"},
	{ID: "tp_divide", Family: FamilyTPDivisibility, Version: 1, compute: ruleTPDivisibility,
		Strategy: "the nearest tensor_parallel_size below and above that divides the attention and KV heads (and fits by the calculator)"},
	{ID: "port_choice", Family: FamilyPortInUse, Version: 1, compute: rulePortInUse,
		Strategy: "no computed value: which port is free is not in a log; the operator chooses"},
	{ID: "hub_access", Family: FamilyGatedRepo, Version: 1, compute: ruleGatedRepo,
		Strategy: "no plan change: a credential with access to the repository"},
	{ID: "chat_template", Family: FamilyMissingChatTemplate, Version: 1, compute: ruleChatTemplate,
		Strategy: "no plan change: a chat template the operator supplies"},
	{ID: "nixl_align", Family: FamilyNIXLHandshake, Version: 1, compute: ruleNIXLHandshake,
		Strategy: "align dtype / kv_cache_dtype and the engine build with the fleet's engine contract"},
	{ID: "dist_init", Family: FamilyDistributedInit, Version: 1, compute: ruleDistributedInit,
		Strategy: "no plan change: the network and NCCL settings of the host"},
	{ID: "host_oom", Family: FamilyOOMKilled, Version: 1, compute: ruleOOMKilled,
		Strategy: "no plan change: host memory for the process"},
	{ID: "engine_dead", Family: FamilyEngineDead, Version: 1, compute: ruleEngineDead,
		Strategy: "no plan change: the root cause precedes EngineDeadError in the log"},
}

// Rules whose families no plan field can fix: each says what the operator
// must do, and computes nothing.

func rulePortInUse(c *ruleCtx) {
	which := "the engine's port"
	if p := c.f.Port; p != nil {
		which = fmt.Sprintf("port %d", *p)
	}
	c.action(ActionChoosePort, which+" is taken by another process. Which port is free on the host is not in the log: choose one, then set it as --port and in the engine's url in the fleet document")
	c.need(NeedOperatorChoice, "port", "the next free port is not computable from a log")
}

func ruleGatedRepo(c *ruleCtx) {
	status := "refused access"
	if s := c.f.HTTPStatus; s != nil {
		status = fmt.Sprintf("answered %d", *s)
	}
	c.action(ActionCredential, "the model hub "+status+": accept the model's licence with an account that has access and give the engine its token through the environment (HF_TOKEN) — never in the plan or the fleet file")
	c.need(NeedCredential, "hub_token", "access to a gated repository is a credential, not a launch value")
}

func ruleChatTemplate(c *ruleCtx) {
	c.action(ActionChatTemplate, "the tokenizer has no chat template: start the engine with --chat-template and a template file you trust, or send completions instead of chat requests")
	c.need(NeedOperatorChoice, "chat_template", "the template is the operator's file, not a computable value")
}

func ruleUnsupportedArch(c *ruleCtx) {
	arch := "the model's architecture"
	if a := c.f.Architecture; a != nil {
		arch = a.String()
	}
	if r := c.f.ArchitectureRegistered; r != nil && *r {
		// The message's own list names it: this vLLM registers the
		// architecture and could not load its model class, so another
		// release is not the fix; the error logged before it is.
		c.action(ActionRootCause, arch+" is in this vLLM's model registry (the message lists it) but was not resolved: fix the error logged before it (a failed import: a missing package, an incompatible transformers or torch version), or name the implementation explicitly as vLLM's troubleshooting guide says under \"Model not supported\"; another engine version is not the fix")
		c.need(NeedRootCause, "import_error", "the import error is logged before this message, not in it")
		return
	}
	c.action(ActionEngineVersion, arch+" is not in this vLLM's model registry: use a vLLM release that supports it (remote code is never enabled by a diagnosis)")
	c.need(NeedOperatorChoice, "engine_version", "which engine release supports the architecture is not in the log")
}

func ruleDistributedInit(c *ruleCtx) {
	c.action(ActionNetwork, "check the distributed_init_method address, set VLLM_HOST_IP, NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME to the interface the ranks share; GPUDirect RDMA needs the IPC_LOCK capability and a mounted /dev/shm")
	c.need(NeedRootCause, "network", "NCCL initialisation depends on the host network, not on a launch value")
}

func ruleOOMKilled(c *ruleCtx) {
	c.action(ActionHostMemory, "the kernel's OOM killer ended the process: host memory, not GPU memory, ran out — give the container more memory or lower --swap-space / --cpu-offload-gb")
	c.need(NeedRootCause, "host_memory", "the log does not state the host memory the process needed")
}

func ruleEngineDead(c *ruleCtx) {
	c.action(ActionRootCause, "the engine core died during a request; its cause is logged before EngineDeadError (an OOM, a CUDA error): diagnose the log up to that point")
	c.need(NeedRootCause, "earlier_failure", "EngineDeadError is a consequence, not a cause")
}

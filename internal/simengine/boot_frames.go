package simengine

// The Python call stacks a failing vLLM start-up prints, by stage and
// engine era, so a simulated failure carries the real engine call site
// (the module a failure fingerprint is keyed on). Paths are relative to
// the install's site-packages unless absolute or frozen; line numbers are
// those of the releases the frames were read from (V1: the 0.11–0.21
// line; V0: 0.8) and carry no meaning of their own — fingerprinting drops
// them.

// frame is one traceback entry: `File "<file>", line <line>, in <fn>`
// followed by the source line (none for compiled frames).
type frame struct {
	file string
	line int
	fn   string
	src  string
}

func fr(file string, line int, fn, src string) frame { return frame{file, line, fn, src} }

// sitePackages is where the simulated image installs Python packages.
const sitePackages = "/usr/local/lib/python3.12/dist-packages/"

func (f frame) path() string {
	switch {
	case f.file == "" || f.file[0] == '/' || f.file[0] == '<' || len(f.file) > 4 && f.file[len(f.file)-4:] == ".pyx":
		return f.file
	}
	return sitePackages + f.file
}

func cat(parts ...[]frame) []frame {
	var out []frame
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// ---- API server (both eras share the socket and the event loop) ----

var v1CLIFrames = []frame{
	fr("/usr/local/bin/vllm", 10, "<module>", "sys.exit(main())"),
	fr("vllm/entrypoints/cli/main.py", 73, "main", "args.dispatch_function(args)"),
	fr("vllm/entrypoints/cli/serve.py", 60, "cmd", "uvloop.run(run_server(args))"),
}

var v0CLIFrames = []frame{
	fr("<frozen runpy>", 198, "_run_module_as_main", ""),
	fr("<frozen runpy>", 88, "_run_code", ""),
	fr("vllm/entrypoints/openai/api_server.py", 1121, "<module>", "uvloop.run(run_server(args))"),
}

var loopFrames = []frame{
	fr("uvloop/__init__.py", 109, "run", "return __asyncio.run("),
	fr("/usr/lib/python3.12/asyncio/runners.py", 195, "run", "return runner.run(main)"),
	fr("/usr/lib/python3.12/asyncio/runners.py", 118, "run", "return self._loop.run_until_complete(task)"),
	fr("uvloop/loop.pyx", 1518, "uvloop.loop.Loop.run_until_complete", ""),
	fr("uvloop/__init__.py", 61, "wrapper", "return await main"),
}

var aenter = fr("/usr/lib/python3.12/contextlib.py", 210, "__aenter__", "return await anext(self.gen)")

func apiFrames(v0 bool) []frame {
	if v0 {
		return cat(v0CLIFrames, loopFrames)
	}
	return cat(v1CLIFrames, loopFrames)
}

func portFrames(v0 bool) []frame {
	bind := []frame{
		fr("vllm/entrypoints/openai/api_server.py", 1821, "create_server_socket", "sock.bind(addr)"),
	}
	if v0 {
		return cat(apiFrames(true), []frame{
			fr("vllm/entrypoints/openai/api_server.py", 1045, "run_server", "sock = create_server_socket(sock_addr)"),
		}, bind)
	}
	return cat(apiFrames(false), []frame{
		fr("vllm/entrypoints/openai/api_server.py", 1883, "run_server", "listen_address, sock = setup_server(args)"),
		fr("vllm/entrypoints/openai/api_server.py", 1861, "setup_server", "sock = create_server_socket(sock_addr)"),
	}, bind)
}

// engineClientFrames reach build_async_engine_client_from_engine_args.
func engineClientFrames(v0 bool) []frame {
	if v0 {
		return cat(apiFrames(true), []frame{
			fr("vllm/entrypoints/openai/api_server.py", 1069, "run_server", "async with build_async_engine_client(args) as engine_client:"),
			aenter,
			fr("vllm/entrypoints/openai/api_server.py", 146, "build_async_engine_client", "async with build_async_engine_client_from_engine_args("),
			aenter,
		})
	}
	return cat(apiFrames(false), []frame{
		fr("vllm/entrypoints/openai/api_server.py", 1884, "run_server", "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)"),
		fr("vllm/entrypoints/openai/api_server.py", 1902, "run_server_worker", "async with build_async_engine_client("),
		aenter,
		fr("vllm/entrypoints/openai/api_server.py", 180, "build_async_engine_client", "async with build_async_engine_client_from_engine_args("),
		aenter,
	})
}

// configFrames reach VllmConfig's __post_init__ from the API server (config
// time, before any engine process starts), then tail.
func configFrames(v0 bool, tail ...frame) []frame {
	if v0 {
		return cat(engineClientFrames(true), []frame{
			fr("vllm/entrypoints/openai/api_server.py", 166, "build_async_engine_client_from_engine_args", "vllm_config = engine_args.create_engine_config(usage_context=usage_context)"),
			fr("vllm/engine/arg_utils.py", 1404, "create_engine_config", "config = VllmConfig("),
			fr("<string>", 19, "__init__", ""),
		}, tail)
	}
	return cat(engineClientFrames(false), []frame{
		fr("vllm/entrypoints/openai/api_server.py", 206, "build_async_engine_client_from_engine_args", "vllm_config = engine_args.create_engine_config(usage_context=usage_context)"),
		fr("vllm/engine/arg_utils.py", 1421, "create_engine_config", "config = VllmConfig("),
	}, tail)
}

func tpFrames(v0 bool) []frame {
	if v0 {
		return configFrames(true,
			fr("vllm/config.py", 3828, "__post_init__", "self.model_config.verify_with_parallel_config(self.parallel_config)"),
			fr("vllm/config.py", 873, "verify_with_parallel_config", "raise ValueError("))
	}
	return configFrames(false,
		fr("vllm/config/vllm.py", 540, "__post_init__", "self.model_config.verify_with_parallel_config(self.parallel_config)"),
		fr("vllm/config/model.py", 1414, "verify_with_parallel_config", "raise ValueError("))
}

// quantFrames reach VllmConfig's quantization check (config time, in
// the API server).
func quantFrames(v0 bool) []frame {
	if v0 {
		return configFrames(true,
			fr("vllm/config.py", 3771, "__post_init__", "self.quant_config = VllmConfig._get_quantization_config("),
			fr("vllm/config.py", 3690, "_get_quantization_config", "raise ValueError("))
	}
	return configFrames(false,
		fr("vllm/config/vllm.py", 495, "__post_init__", "self.quant_config = VllmConfig._get_quantization_config("),
		fr("vllm/config/vllm.py", 836, "_get_quantization_config", "raise ValueError("))
}

// wrapperFrames end in the API server's "engine failed" RuntimeError.
func wrapperFrames(v0 bool) []frame {
	if v0 {
		return cat(engineClientFrames(true), []frame{
			fr("vllm/entrypoints/openai/api_server.py", 239, "build_async_engine_client_from_engine_args", "raise RuntimeError("),
		})
	}
	return cat(engineClientFrames(false), []frame{
		fr("vllm/entrypoints/openai/api_server.py", 225, "build_async_engine_client_from_engine_args", "async_llm = AsyncLLM.from_vllm_config("),
		fr("vllm/v1/engine/async_llm.py", 207, "from_vllm_config", "return cls("),
		fr("vllm/v1/engine/async_llm.py", 134, "__init__", "self.engine_core = EngineCoreClient.make_async_mp_client("),
		fr("vllm/v1/engine/core_client.py", 102, "make_async_mp_client", "return AsyncMPClient(*client_args)"),
		fr("vllm/v1/engine/core_client.py", 769, "__init__", "super().__init__("),
		fr("vllm/v1/engine/core_client.py", 448, "__init__", "with launch_core_engines(vllm_config, executor_class, log_stats) as ("),
		fr("/usr/lib/python3.12/contextlib.py", 144, "__exit__", "next(self.gen)"),
		fr("vllm/v1/engine/utils.py", 732, "launch_core_engines", "wait_for_engine_startup("),
		fr("vllm/v1/engine/utils.py", 785, "wait_for_engine_startup", "raise RuntimeError("),
	})
}

// ---- engine process ----

// bootstrapFrames open the traceback multiprocessing prints for a dead
// child process.
func bootstrapFrames(v0 bool) []frame {
	fs := []frame{
		fr("/usr/lib/python3.12/multiprocessing/process.py", 314, "_bootstrap", "self.run()"),
		fr("/usr/lib/python3.12/multiprocessing/process.py", 108, "run", "self._target(*self._args, **self._kwargs)"),
	}
	if v0 {
		return append(fs, fr("vllm/engine/multiprocessing/engine.py", 450, "run_mp_engine", "raise e"))
	}
	return append(fs, fr("vllm/v1/engine/core.py", 712, "run_engine_core", "raise e"))
}

// coreFrames reach the engine's constructor step that runs the stage:
// the executor (device, weights) or the KV cache set-up (KV, graphs).
func coreFrames(v0, kv bool) []frame {
	if v0 {
		fs := []frame{
			fr("vllm/engine/multiprocessing/engine.py", 436, "run_mp_engine", "engine = MQLLMEngine.from_vllm_config("),
			fr("vllm/engine/multiprocessing/engine.py", 128, "from_vllm_config", "return cls("),
			fr("vllm/engine/multiprocessing/engine.py", 82, "__init__", "self.engine = LLMEngine(*args, **kwargs)"),
		}
		if kv {
			return append(fs,
				fr("vllm/engine/llm_engine.py", 285, "__init__", "self._initialize_kv_caches()"),
				fr("vllm/engine/llm_engine.py", 447, "_initialize_kv_caches", "self.model_executor.initialize_cache(num_gpu_blocks, num_cpu_blocks)"),
				fr("vllm/executor/executor_base.py", 122, "initialize_cache", "self.collective_rpc(\"initialize_cache\","),
				fr("vllm/executor/uniproc_executor.py", 56, "collective_rpc", "answer = run_method(self.driver_worker, method, args, kwargs)"),
				fr("vllm/utils.py", 2378, "run_method", "return func(*args, **kwargs)"),
				fr("vllm/worker/worker.py", 291, "initialize_cache", "raise_if_cache_size_invalid("))
		}
		return append(fs,
			fr("vllm/engine/llm_engine.py", 282, "__init__", "self.model_executor = executor_class(vllm_config=vllm_config)"),
			fr("vllm/executor/executor_base.py", 52, "__init__", "self._init_executor()"))
	}
	fs := []frame{
		fr("vllm/v1/engine/core.py", 699, "run_engine_core", "engine_core = EngineCoreProc(*args, **kwargs)"),
		fr("vllm/v1/engine/core.py", 498, "__init__", "super().__init__(vllm_config, executor_class, log_stats,"),
	}
	if kv {
		return append(fs,
			fr("vllm/v1/engine/core.py", 92, "__init__", "self._initialize_kv_caches(vllm_config)"),
			fr("vllm/v1/engine/core.py", 199, "_initialize_kv_caches", "kv_cache_configs = get_kv_cache_configs(vllm_config, kv_cache_specs,"))
	}
	return append(fs,
		fr("vllm/v1/engine/core.py", 83, "__init__", "self.model_executor = executor_class(vllm_config)"),
		fr("vllm/v1/executor/abstract.py", 54, "__init__", "self._init_executor()"))
}

// kvCheckFrames: V1's check inside kv_cache_utils (the V0 one is in
// coreFrames' last frame).
func kvCheckFrames(v0 bool) []frame {
	if v0 {
		return []frame{fr("vllm/worker/worker.py", 545, "raise_if_cache_size_invalid", "raise ValueError(")}
	}
	return []frame{
		fr("vllm/v1/core/kv_cache_utils.py", 1243, "get_kv_cache_configs", "check_enough_kv_cache_memory(vllm_config, kv_cache_spec_one_worker,"),
		fr("vllm/v1/core/kv_cache_utils.py", 716, "check_enough_kv_cache_memory", "_check_enough_kv_cache_memory("),
		fr("vllm/v1/core/kv_cache_utils.py", 694, "_check_enough_kv_cache_memory", "raise ValueError("),
	}
}

// executorFrames reach the worker's method in a single-process
// (uniproc) executor; multiproc workers start at workerMainFrames.
func executorFrames(v0 bool, method string) []frame {
	if v0 {
		return []frame{
			fr("vllm/executor/uniproc_executor.py", 46, "_init_executor", "self.collective_rpc(\""+method+"\")"),
			fr("vllm/executor/uniproc_executor.py", 56, "collective_rpc", "answer = run_method(self.driver_worker, method, args, kwargs)"),
			fr("vllm/utils.py", 2378, "run_method", "return func(*args, **kwargs)"),
		}
	}
	return []frame{
		fr("vllm/v1/executor/uniproc_executor.py", 48, "_init_executor", "self.driver_worker."+method+"()"),
	}
}

func workerMainFrames(method string) []frame {
	return []frame{
		fr("vllm/v1/executor/multiproc_executor.py", 561, "worker_main", "worker = WorkerProc(*args, **kwargs)"),
		fr("vllm/v1/executor/multiproc_executor.py", 437, "__init__", "self.worker."+method+"()"),
	}
}

func initDeviceFrames(v0 bool) []frame {
	if v0 {
		return []frame{
			fr("vllm/worker/worker_base.py", 604, "init_device", "self.worker.init_device()  # type: ignore"),
			fr("vllm/worker/worker.py", 175, "init_device", "_check_if_gpu_supports_dtype(self.model_config.dtype)"),
			fr("vllm/worker/worker.py", 561, "_check_if_gpu_supports_dtype", "raise ValueError("),
		}
	}
	return []frame{
		fr("vllm/v1/worker/worker_base.py", 326, "init_device", "self.worker.init_device()  # type: ignore"),
		fr("vllm/v1/worker/gpu_worker.py", 188, "init_device", "current_platform.check_if_supports_dtype(self.model_config.dtype)"),
		fr("vllm/platforms/cuda.py", 517, "check_if_supports_dtype", "raise ValueError("),
	}
}

// llamaInitFrames build the model until a linear layer allocates its
// weight; the allocation is where loading runs out of memory.
var llamaInitFrames = []frame{
	fr("vllm/model_executor/models/llama.py", 537, "__init__", "self.model = self._init_model(vllm_config=vllm_config,"),
	fr("vllm/model_executor/models/llama.py", 583, "_init_model", "return LlamaModel(vllm_config=vllm_config,"),
	fr("vllm/compilation/decorators.py", 201, "__init__", "old_init(self, vllm_config=vllm_config, prefix=prefix, **kwargs)"),
	fr("vllm/model_executor/models/llama.py", 362, "__init__", "self.start_layer, self.end_layer, self.layers = make_layers("),
	fr("vllm/model_executor/models/utils.py", 627, "make_layers", "maybe_offload_to_cpu(layer_fn(prefix=f\"{prefix}.{idx}\"))"),
	fr("vllm/model_executor/models/llama.py", 364, "<lambda>", "lambda prefix: layer_type(vllm_config=vllm_config, prefix=prefix),"),
	fr("vllm/model_executor/models/llama.py", 288, "__init__", "self.mlp = LlamaMLP("),
	fr("vllm/model_executor/models/llama.py", 72, "__init__", "self.gate_up_proj = MergedColumnParallelLinear("),
	fr("vllm/model_executor/layers/linear.py", 655, "__init__", "super().__init__("),
	fr("vllm/model_executor/layers/linear.py", 480, "__init__", "self.quant_method.create_weights("),
	fr("vllm/model_executor/layers/linear.py", 192, "create_weights", "weight = Parameter(torch.empty(sum(output_partition_sizes),"),
	fr("torch/utils/_device.py", 104, "__torch_function__", "return func(*args, **kwargs)"),
}

func loadFrames(v0 bool) []frame {
	if v0 {
		return cat([]frame{
			fr("vllm/worker/worker.py", 183, "load_model", "self.model_runner.load_model()"),
			fr("vllm/worker/model_runner.py", 1113, "load_model", "self.model = get_model(vllm_config=self.vllm_config)"),
			fr("vllm/model_executor/model_loader/__init__.py", 14, "get_model", "return loader.load_model(vllm_config=vllm_config)"),
			fr("vllm/model_executor/model_loader/loader.py", 452, "load_model", "model = _initialize_model(vllm_config=vllm_config)"),
			fr("vllm/model_executor/model_loader/loader.py", 133, "_initialize_model", "return model_class(vllm_config=vllm_config, prefix=prefix)"),
		}, llamaInitFrames)
	}
	return cat([]frame{
		fr("vllm/v1/worker/gpu_worker.py", 213, "load_model", "self.model_runner.load_model(eep_scale_up=eep_scale_up)"),
		fr("vllm/v1/worker/gpu_model_runner.py", 2573, "load_model", "self.model = model_loader.load_model("),
		fr("vllm/model_executor/model_loader/base_loader.py", 45, "load_model", "model = initialize_model(vllm_config=vllm_config,"),
		fr("vllm/model_executor/model_loader/utils.py", 63, "initialize_model", "return model_class(vllm_config=vllm_config, prefix=prefix)"),
	}, llamaInitFrames)
}

var graphTorchFrames = []frame{
	fr("torch/cuda/graphs.py", 186, "__exit__", "self.cuda_graph.capture_end()"),
	fr("torch/cuda/graphs.py", 84, "capture_end", "super().capture_end()"),
}

// graphFrames run CUDA-graph capture from the KV set-up (V0) or the
// warm-up RPC (V1) to the allocation that fails.
func graphFrames(v0 bool) []frame {
	if v0 {
		return cat([]frame{
			fr("vllm/worker/worker.py", 306, "initialize_cache", "self._warm_up_model()"),
			fr("vllm/worker/worker.py", 336, "_warm_up_model", "self.model_runner.capture_model(self.gpu_cache)"),
			fr("torch/utils/_contextlib.py", 116, "decorate_context", "return func(*args, **kwargs)"),
			fr("vllm/worker/model_runner.py", 1562, "capture_model", "graph_runner.capture(**capture_inputs)"),
			fr("vllm/worker/model_runner.py", 1930, "capture", "with torch.cuda.graph(self._graph, pool=memory_pool, stream=stream):"),
		}, graphTorchFrames)
	}
	return cat([]frame{
		fr("vllm/v1/worker/gpu_worker.py", 345, "compile_or_warm_up_model", "cuda_graph_memory_bytes = self.model_runner.capture_model()"),
		fr("vllm/v1/worker/gpu_model_runner.py", 3471, "capture_model", "self._capture_cudagraphs("),
		fr("vllm/v1/worker/gpu_model_runner.py", 3546, "_capture_cudagraphs", "self._dummy_run("),
		fr("torch/utils/_contextlib.py", 116, "decorate_context", "return func(*args, **kwargs)"),
		fr("vllm/v1/worker/gpu_model_runner.py", 3151, "_dummy_run", "outputs = self.model("),
		fr("vllm/compilation/cuda_graph.py", 178, "__call__", "with torch.cuda.graph(cudagraph, pool=self.graph_pool):"),
	}, graphTorchFrames)
}

// v1GraphCoreFrames reach the warm-up RPC from the engine core.
func v1GraphCoreFrames(multiproc bool) []frame {
	fs := []frame{
		fr("vllm/v1/engine/core.py", 699, "run_engine_core", "engine_core = EngineCoreProc(*args, **kwargs)"),
		fr("vllm/v1/engine/core.py", 498, "__init__", "super().__init__(vllm_config, executor_class, log_stats,"),
		fr("vllm/v1/engine/core.py", 92, "__init__", "self._initialize_kv_caches(vllm_config)"),
		fr("vllm/v1/engine/core.py", 207, "_initialize_kv_caches", "self.model_executor.initialize_from_config(kv_cache_configs)"),
		fr("vllm/v1/executor/abstract.py", 75, "initialize_from_config", "self.collective_rpc(\"compile_or_warm_up_model\")"),
	}
	if multiproc {
		return append(fs,
			fr("vllm/v1/executor/multiproc_executor.py", 264, "collective_rpc", "result = get_response(w, dequeue_timeout,"),
			fr("vllm/v1/executor/multiproc_executor.py", 248, "get_response", "raise RuntimeError("))
	}
	return append(fs,
		fr("vllm/v1/executor/uniproc_executor.py", 83, "collective_rpc", "return [run_method(self.driver_worker, method, args, kwargs)]"),
		fr("vllm/v1/serial_utils.py", 479, "run_method", "return func(*args, **kwargs)"))
}

// v1WorkerWaitFrames: the engine core waiting for multiproc workers that
// died while starting.
var v1WorkerWaitFrames = []frame{
	fr("vllm/v1/executor/multiproc_executor.py", 111, "_init_executor", "self.workers = WorkerProc.wait_for_ready(unready_workers)"),
	fr("vllm/v1/executor/multiproc_executor.py", 502, "wait_for_ready", "raise e from None"),
}

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/launch"
)

// planOpts are plan's flags.
type planOpts struct {
	path, out, bindHost string
	scBase              int
	open                bool
	adv                 adviceFlags
}

const planLong = `Render each engine's vllm serve command, environment and attestation
skeleton from the fleet into a fresh launch directory.

The engines authenticate the router with the key in the variable
engine.engine_api_key_env names: launch.sh exports VLLM_API_KEY="$NAME" at
launch time (the value is never written, and stays off the command line).
A fleet without engine.engine_api_key_env is refused (exit 2): vllm serve
--host 0.0.0.0 with no key serves anyone who reaches the port. Pass
--allow-unauthenticated only when the network boundary protects the
engines; the plan then says so in launch.json ("unauthenticated": true), in
launch.sh, and on stderr.

With --model-dir, every engine's command also carries --max-model-len and
--gpu-memory-utilization computed by the memory calculator (narwhal plan)
for the model's headers on hardware.accelerator at hardware.tensor_parallel
and the contract's vLLM version: the largest feasible context unless
--max-model-len asks for one. A model the calculator says does not fit, or
cannot predict, is refused (exit 1). The fleet schema has no model
directory field, so it is a flag.

--dp and --enable-expert-parallel (with --model-dir) plan each engine as
vLLM's --data-parallel-size and --enable-expert-parallel do, and the
command carries them: tensor_parallel × dp GPUs per engine (refused above
hardware.accelerators_per_engine), figures per GPU. With dp > 1 the
calculator has no non-torch calibration, so the advice is unknown and
refused (exit 1) with that reason.`

func newPlanCmd() *cobra.Command {
	var o planOpts
	c := &cobra.Command{
		Use:   "plan --fleet PATH [--out runs/engine-launch-<timestamp>/]",
		Short: "Render each engine's vllm serve command, environment and attestation skeleton from the fleet",
		Long:  planLong,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runPlan(cmd, o) },
	}
	c.Flags().StringVar(&o.path, "fleet", "", "fleet file (narwhal.fleet v1)")
	c.Flags().StringVar(&o.out, "out", "", "fresh launch directory (default runs/engine-launch-<UTC>-<pid>)")
	c.Flags().StringVar(&o.bindHost, "bind-host", "0.0.0.0", "vllm serve --host")
	c.Flags().IntVar(&o.scBase, "side-channel-base", 5600, "engine i's NIXL side-channel port is base+i")
	c.Flags().BoolVar(&o.open, "allow-unauthenticated", false, "render engines without an API key when the fleet sets no engine.engine_api_key_env (the plan says so loudly)")
	c.Flags().StringVar(&o.adv.modelDir, "model-dir", "", "the model's directory (config.json, *.safetensors): size every engine with the memory calculator")
	c.Flags().Int64Var(&o.adv.maxModelLen, "max-model-len", 0, "with --model-dir: the context to plan for (0: the largest feasible)")
	c.Flags().Float64Var(&o.adv.utilization, "gpu-memory-utilization", 0, "with --model-dir: the fraction of GPU memory vLLM may use (0: the version's default)")
	c.Flags().IntVar(&o.adv.dp, "dp", 1, "with --model-dir: vLLM --data-parallel-size per engine (tensor_parallel × dp GPUs); the command carries it")
	c.Flags().BoolVar(&o.adv.ep, "enable-expert-parallel", false, "with --model-dir: vLLM --enable-expert-parallel (MoE experts whole over tensor_parallel × dp ranks); the command carries it")
	c.Flags().Float64Var(&o.adv.gpuGiB, "gpu-memory-gib", 0, "with --model-dir: GPU memory in GiB when hardware.accelerator is not in the built-in table")
	return c
}

// runPlan renders the fleet's launches into a fresh directory and lists
// the files it wrote.
func runPlan(cmd *cobra.Command, o planOpts) error {
	if o.path == "" {
		return cli.Usage("--fleet is required: name the fleet file to plan launches for")
	}
	cfg, err := fleet.Load(o.path)
	if err != nil {
		return cli.Invalid(err)
	}
	advice, note, err := memoryAdvice(cfg, o.adv)
	if err != nil {
		return err
	}
	if note != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), note)
	}
	plans, err := launch.Plan(cfg, launch.Options{BindHost: o.bindHost, SideChannelBase: o.scBase, AllowUnauthenticated: o.open, Memory: advice})
	if err != nil {
		return cli.Invalid(fmt.Errorf("%s: %w", o.path, err))
	}
	if len(plans) > 0 && plans[0].Unauthenticated {
		fmt.Fprintf(cmd.ErrOrStderr(), "WARNING: the plan starts vLLM without an API key on --host %s (--allow-unauthenticated): anyone who reaches an engine's port can use it; set engine.engine_api_key_env to fix\n", o.bindHost)
	}
	if o.out == "" {
		o.out = filepath.Join("runs", fmt.Sprintf("engine-launch-%s-%d", time.Now().UTC().Format("20060102T150405Z"), os.Getpid()))
	}
	files, err := launch.Write(o.out, cfg, plans)
	if err != nil {
		return cli.Failed(err)
	}
	for _, f := range files {
		fmt.Fprintln(cmd.OutOrStdout(), f)
	}
	return nil
}

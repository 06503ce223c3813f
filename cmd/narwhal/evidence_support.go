package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/evidence/support"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// hostCPUArch is the default CPU architecture dimension: this host's.
func hostCPUArch() string { return support.CPUArchFromGOARCH(runtime.GOARCH) }

type supportFlags struct {
	key                          support.Key
	state, plugin, reason, level string
	failures                     []string
}

func evSupportCmd(dir *string) *cobra.Command {
	var f supportFlags
	c := &cobra.Command{
		Use:   "support ARCHITECTURE [--gpu-arch sm_90] [--cpu-arch x86_64] [--vllm-version V]",
		Short: "Print the engine support state of a model architecture on a GPU and CPU architecture",
		Long: `Derive the support state — native_vllm, transformers_backend, plugin,
recognized_but_failed or unsupported — of a model architecture (config.json
architectures[0]) on one GPU architecture and one CPU architecture, from the
pinned vLLM registry facts and the support records in the store. A state on
one architecture pair says nothing about another. With --mark STATE, write a
support record for that exact pair instead (recognized_but_failed needs
--failure DIGEST, plugin needs --plugin NAME@VERSION).

Exit codes: 0 the state was printed or recorded, 1 the store failed, 2 bad
input or no pinned registry for the version.`,
		Example: `  narwhal evidence support Qwen3ForCausalLM --gpu-arch sm_90
  narwhal evidence support Qwen3ForCausalLM --gpu-arch sm_75 --mark recognized_but_failed --failure 1220…`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.key.Architecture = args[0]
			if f.state != "" {
				return markSupport(cmd, store.Open(*dir), f)
			}
			return showSupport(cmd, store.Open(*dir), f.key)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.key.GPUArch, "gpu-arch", "", "GPU architecture: sm_80, sm_90, gfx942, … (or pass --gpu)")
	gpu := fl.String("gpu", "", "GPU name from the built-in table; its compute capability gives --gpu-arch")
	fl.StringVar(&f.key.CPUArch, "cpu-arch", hostCPUArch(), "CPU architecture: x86_64 or aarch64")
	fl.StringVar(&f.key.EngineVersion, "vllm-version", memory.DefaultVLLMVersion, "vLLM release")
	fl.StringVar(&f.state, "mark", "", "record this state for the pair: "+joinStates())
	fl.StringSliceVar(&f.failures, "failure", nil, "failure record digest a recognized_but_failed mark rests on (repeatable)")
	fl.StringVar(&f.plugin, "plugin", "", "plugin name@version, for --mark plugin")
	fl.StringVar(&f.reason, "reason", "", "one-line reason stored with the mark")
	fl.StringVar(&f.level, "level", string(evidence.CommunityReported), "evidence level of the mark")
	c.PreRunE = func(*cobra.Command, []string) error { return gpuArchFlag(&f.key, *gpu) }
	return c
}

func joinStates() string {
	s := make([]string, len(support.States))
	for i, st := range support.States {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

func gpuArchFlag(k *support.Key, gpu string) error {
	if gpu == "" || k.GPUArch != "" {
		return nil
	}
	g, err := memory.LookupGPU(gpu)
	if err != nil {
		return cli.Invalid(err)
	}
	k.GPUArch = support.GPUArchFromCC(g.ComputeCapability)
	return nil
}

func showSupport(cmd *cobra.Command, st *store.Store, k support.Key) error {
	e, ok, err := support.Lookup(st, k)
	switch {
	case err != nil && !ok:
		return cli.Invalid(err)
	case err != nil:
		return cli.Failed(err)
	case !ok:
		return cli.Invalid(fmt.Errorf("vLLM %s: no pinned support registry for this version; pass --vllm-version 0.10.x or 0.11.x", k.EngineVersion))
	}
	_, err = fmt.Fprintln(cmd.OutOrStdout(), supportLine(e))
	return err
}

// supportLine is the one-line form plan and diagnose print first.
func supportLine(e support.Entry) string {
	s := fmt.Sprintf("%s: %s — %s", e.State, e.Key, e.Reason)
	if e.Plugin != "" {
		s += " (plugin " + e.Plugin + ")"
	}
	return s
}

func markSupport(cmd *cobra.Command, st *store.Store, f supportFlags) error {
	m := support.Mark{Key: f.key, State: support.State(f.state), Plugin: f.plugin, Reason: f.reason,
		Inputs: f.failures, Level: evidence.Level(f.level)}
	r, err := support.NewRecord(m, ports.SystemClock())
	if err != nil {
		return cli.Invalid(err)
	}
	d, err := st.PutRecord(r)
	if err != nil {
		return cli.Failed(err)
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s  %s %s\n", d, m.State, m.Key)
	return err
}

// writeSupportFirst prints the engine support state ahead of every memory
// figure: a plan for an architecture the engine cannot run must say so
// before it says how the memory would divide.
func writeSupportFirst(w io.Writer, who string, e *support.Entry) {
	if e == nil {
		return
	}
	fmt.Fprintf(w, "%s: engine support %s\n", who, supportLine(*e))
	if !e.State.Runs() {
		fmt.Fprintf(w, "%s: the engine is not expected to load this model on this pair; any memory figure below assumes it would\n", who)
	}
}

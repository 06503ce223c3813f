package attest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
)

// AcceleratorSource observes the engine host's accelerators. It never
// fails: what it cannot observe it reports as AcceleratorUnknown with the
// reason.
type AcceleratorSource interface {
	Accelerator(ctx context.Context) Accelerator
}

// NvidiaSMI runs nvidia-smi on the engine host (NVML's command-line
// front end) and parses its --query-gpu output.
type NvidiaSMI struct {
	Path    string        // executable; default "nvidia-smi" on PATH
	Timeout time.Duration // default 10 s: a wedged driver must not hang start-up
	// Run, when set, replaces executing Path (tests).
	Run func(ctx context.Context, path string, args ...string) ([]byte, error)
}

// Accelerator implements AcceleratorSource.
func (n NvidiaSMI) Accelerator(ctx context.Context) Accelerator {
	path := n.Path
	if path == "" {
		path = "nvidia-smi"
	}
	src := path + " " + strings.Join(NvidiaSMIArgs, " ")
	run := n.Run
	if run == nil {
		resolved, err := exec.LookPath(path)
		if err != nil {
			return UnknownAccelerator(src, path+" not found: no NVIDIA driver tools on this host")
		}
		path, run = resolved, runCommand
	}
	timeout := n.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := run(ctx, path, NvidiaSMIArgs...)
	if err != nil {
		return UnknownAccelerator(src, "nvidia-smi failed: "+err.Error())
	}
	a, err := ParseNvidiaSMI(out)
	if err != nil {
		return UnknownAccelerator(src, err.Error())
	}
	return a
}

// runCommand runs path with args under ctx and returns its stdout; a
// failure carries the first line of its output, which is where nvidia-smi
// says what went wrong ("NVIDIA-SMI has failed because it couldn't
// communicate with the NVIDIA driver").
func runCommand(ctx context.Context, path string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("no answer within its timeout: %w", ctx.Err())
	}
	if err != nil {
		msg := firstLine(stderr.String())
		if msg == "" {
			msg = firstLine(stdout.String())
		}
		return nil, fmt.Errorf("%v: %s", err, msg)
	}
	return stdout.Bytes(), nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return clip(strings.TrimSpace(s))
}

// DevicesReader is an engine client that can read vLLM's device report;
// *vllm.Client is one.
type DevicesReader interface {
	ServerDevices(ctx context.Context) ([]byte, error)
}

// EngineDevices asks the engine itself (GET /v1/server/devices).
type EngineDevices struct {
	Engine     DevicesReader
	EngineBase string // for Source
	Timeout    time.Duration
}

// Accelerator implements AcceleratorSource.
func (e EngineDevices) Accelerator(ctx context.Context) Accelerator {
	src := "GET " + e.EngineBase + "/v1/server/devices"
	if e.Engine == nil {
		return UnknownAccelerator(src, "no engine client")
	}
	if e.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.Timeout)
		defer cancel()
	}
	body, err := e.Engine.ServerDevices(ctx)
	status := 0
	if fe := fault.As(err); fe != nil {
		status = fe.Status
	}
	switch {
	case err != nil && (status == 404 || status == 405):
		return UnknownAccelerator(src, "the engine has no device report (vLLM without /v1/server/devices)")
	case err != nil && (status == 401 || status == 403):
		return UnknownAccelerator(src, "the engine's device report needs its API key, which the sidecar never holds")
	case err != nil:
		return UnknownAccelerator(src, "engine device report unreadable: "+fault.Detail(err))
	}
	a, err := ParseEngineDevices(body, src)
	if err != nil {
		return UnknownAccelerator(src, err.Error())
	}
	return a
}

// FirstObserved tries each source in order and returns the first
// observation; when none observes, an unknown one whose detail lists every
// source's reason.
type FirstObserved []AcceleratorSource

// Accelerator implements AcceleratorSource.
func (f FirstObserved) Accelerator(ctx context.Context) Accelerator {
	var why, srcs []string
	for _, s := range f {
		a := s.Accelerator(ctx)
		if a.Known() {
			return a
		}
		why, srcs = append(why, a.Detail), append(srcs, a.Source)
	}
	if len(why) == 0 {
		return UnknownAccelerator("none", "no accelerator source configured")
	}
	return UnknownAccelerator(strings.Join(srcs, "; then "), strings.Join(why, "; "))
}

// NoAccelerator is the source that never observes (--accelerator-source
// none).
type NoAccelerator struct{}

// Accelerator implements AcceleratorSource.
func (NoAccelerator) Accelerator(context.Context) Accelerator {
	return UnknownAccelerator("none", "accelerator observation turned off (--accelerator-source none)")
}

// errNoSource is returned by SourceFor for an unknown name.
var errNoSource = errors.New("accelerator source must be auto, nvidia-smi, engine or none")

// SourceFor builds the named source: "auto" is nvidia-smi when present,
// else the engine's device report; "nvidia-smi", "engine" and "none" are
// just that one.
func SourceFor(name string, smi NvidiaSMI, engine EngineDevices) (AcceleratorSource, error) {
	switch name {
	case "", "auto":
		return FirstObserved{smi, engine}, nil
	case "nvidia-smi":
		return smi, nil
	case "engine":
		return engine, nil
	case "none":
		return NoAccelerator{}, nil
	}
	return nil, fmt.Errorf("%w, got %q", errNoSource, name)
}

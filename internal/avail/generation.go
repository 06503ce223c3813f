package avail

import (
	"context"
	"errors"
	"fmt"

	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// The loaded profile rows are bound to the engine process they were
// measured on (operations.md §5.9): a row's curves price a process, and a
// restarted or relaunched engine is another one until it is re-profiled.
// The rule is profile.CheckGeneration, the one narwhal-check applies.

// checkProfileGenerations excludes, at start, every engine whose loaded
// profile row was measured on another process generation. ids are the
// identities CaptureIdentities read, in s.order (nil: unreadable).
func (s *Supervisor) checkProfileGenerations(ctx context.Context, ids []*vllm.Identity) {
	gens := *s.gens.Load()
	for i, iid := range s.order {
		if _, ok := gens[iid]; !ok || ids[i] == nil {
			continue
		}
		err := s.profileGenerationGate(ctx, iid, *ids[i], "")
		var unread unreadGeneration
		switch {
		case errors.As(err, &unread):
			s.log.Warn("profile generation not checked at start", "iid", iid, "err", err)
		case err != nil:
			s.log.Error("profile generation mismatch: engine excluded", "iid", iid, "err", err)
			s.lifecycleEvent("profile_generation_blocked", map[string]any{"iid": iid, "reason": err.Error()})
			s.eject(iid, "profile_generation", false)
		}
	}
}

// unreadGeneration is a live generation that could not be read: the
// check did not run, which is not a mismatch.
type unreadGeneration struct{ err error }

func (u unreadGeneration) Error() string { return "profile generation: " + u.err.Error() }
func (u unreadGeneration) Unwrap() error { return u.err }

// profileGenerationGate is the readmission gate on the loaded profile
// (runtime.md §3.5.3 step 3): a row bound to another generation keeps the
// engine out until it is re-profiled; a row without a digest passes.
// attested is an attestation digest the caller has just verified, or ""
// to have the sidecar read here.
func (s *Supervisor) profileGenerationGate(ctx context.Context, iid string, id vllm.Identity, attested string) error {
	want, ok := (*s.gens.Load())[iid]
	if !ok {
		return nil
	}
	live, err := s.liveGeneration(ctx, iid, id, attested)
	if err != nil {
		return unreadGeneration{err}
	}
	return profile.CheckGeneration(profile.Row{IID: iid, GenerationDigest: &want}, live)
}

// liveGeneration is iid's generation digest: version and process start,
// with the verified attestation's digest on a contracted fleet.
func (s *Supervisor) liveGeneration(ctx context.Context, iid string, id vllm.Identity, attested string) (string, error) {
	if s.cfg.EngineContract == nil {
		if id.ProcessStart <= 0 {
			return "", errors.New("the engine exports no process_start_time_seconds")
		}
		return profile.Generation(id.Version, id.ProcessStart, "")
	}
	if attested == "" {
		var err error
		if attested, err = s.probes.AttestationDigest(ctx, iid, id); err != nil {
			return "", fmt.Errorf("attestation: %w", err)
		}
	}
	return profile.Generation(id.Version, id.ProcessStart, attested)
}

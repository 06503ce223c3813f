package router

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// profileGenerations maps iid → the loaded row's generation_digest, for
// the rows that carry one.
func profileGenerations(st *profile.Store) map[string]string {
	out := map[string]string{}
	for _, row := range st.Profiles {
		if row.GenerationDigest != nil {
			out[row.IID] = *row.GenerationDigest
		}
	}
	return out
}

// checkProfileGenerations excludes, at start, every engine whose loaded
// profile row was measured on another process generation (operations.md
// §5.9): its curves price a process that no longer runs. ids are the
// identities captureIdentities read, in r.order (nil: unreadable). The
// rule is profile.CheckGeneration, the one narwhal-check applies.
func (r *Router) checkProfileGenerations(ctx context.Context, ids []*lifecycle.Identity) {
	for i, iid := range r.order {
		want, ok := r.generations[iid]
		if !ok || ids[i] == nil {
			continue
		}
		live, err := r.liveGeneration(ctx, iid, *ids[i])
		if err != nil {
			r.log.Warn("profile generation not checked at start", "iid", iid, "err", err)
			continue
		}
		if err := profile.CheckGeneration(profile.Row{IID: iid, GenerationDigest: &want}, live); err != nil {
			r.log.Error("profile generation mismatch: engine excluded", "iid", iid, "err", err)
			r.lifecycleEvent("profile_generation_blocked", map[string]any{"iid": iid, "reason": err.Error()})
			r.eject(iid, "profile_generation", false)
		}
	}
}

// profileGenerationGate is the readmission gate on the loaded profile
// (runtime.md §3.5.3 step 3): a row bound to another generation keeps the
// engine out until it is re-profiled; a row without a digest passes.
func (r *Router) profileGenerationGate(ctx context.Context, iid string, id lifecycle.Identity) error {
	want, ok := r.generations[iid]
	if !ok {
		return nil
	}
	live, err := r.liveGeneration(ctx, iid, id)
	if err != nil {
		return fmt.Errorf("profile generation: %w", err)
	}
	return profile.CheckGeneration(profile.Row{IID: iid, GenerationDigest: &want}, live)
}

// liveGeneration is iid's generation digest: the verified attestation on
// a contracted fleet, else version and process start.
func (r *Router) liveGeneration(ctx context.Context, iid string, id lifecycle.Identity) (string, error) {
	if r.cfg.EngineContract == nil {
		if id.ProcessStart <= 0 {
			return "", errors.New("the engine exports no process_start_time_seconds")
		}
		return profile.Generation(id.Version, id.ProcessStart, "")
	}
	url := r.attestURL[iid]
	if url == "" {
		return "", fmt.Errorf("no attestation_url for %s", iid)
	}
	ctx, cancel := context.WithTimeout(ctx, r.probeTimeout())
	defer cancel()
	body, err := attest.Fetch(ctx, http.DefaultClient, url)
	if err != nil {
		return "", err
	}
	p, fails := attest.Verify(body, r.cfg.EngineContract, vllm.Identity{Version: id.Version, ProcessStart: id.ProcessStart})
	if len(fails) > 0 {
		return "", fmt.Errorf("attestation: %s", strings.Join(fails, "; "))
	}
	return profile.Generation(id.Version, id.ProcessStart, p.AttestationDigest)
}

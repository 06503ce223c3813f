package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Probe bodies are small; the limits keep a confused primary from
// exhausting the standby's memory.
const (
	maxReadyBody   = 64 << 10
	maxHandoffBody = 32 << 20
)

// probe runs the three checks of the standby loop. It returns the
// document on a good probe, the reason on a miss, and an error only when
// the loop must stop (a schema_version this build does not read).
func (f *Follower) probe(ctx context.Context) (*Handoff, string, error) {
	if miss := f.probeReady(ctx); miss != "" {
		return nil, miss, nil
	}
	doc, miss, err := f.probeHandoff(ctx)
	if err != nil || miss != "" {
		return nil, miss, err
	}
	lease, err := f.Lease.Current()
	switch {
	case err != nil:
		return nil, "lease unreadable: " + err.Error(), nil
	case lease.Holder != doc.Holder || lease.Epoch != doc.Epoch:
		return nil, fmt.Sprintf("primary handoff holder %q epoch %d does not match the lease (%q epoch %d)",
			doc.Holder, doc.Epoch, lease.Holder, lease.Epoch), nil
	case lease.Expired(f.Clock.Now()):
		return nil, "primary's lease has expired", nil
	}
	return doc, "", nil
}

// probeReady: 200 is good; 503 only with "control_ready": true (a primary
// that controls the fleet but is not serving, e.g. under a whole-wave hold).
func (f *Follower) probeReady(ctx context.Context) string {
	status, body, err := f.get(ctx, "/ready", maxReadyBody)
	if err != nil {
		return "primary /ready: " + err.Error()
	}
	switch status {
	case http.StatusOK:
		return ""
	case http.StatusServiceUnavailable:
		var r struct {
			ControlReady bool `json:"control_ready"`
		}
		if json.Unmarshal(body, &r) == nil && r.ControlReady {
			return ""
		}
		return "primary /ready: 503 without control_ready"
	}
	return fmt.Sprintf("primary /ready: status %d", status)
}

func (f *Follower) probeHandoff(ctx context.Context) (*Handoff, string, error) {
	status, body, err := f.get(ctx, "/narwhal/handoff", maxHandoffBody)
	if err != nil {
		return nil, "primary /narwhal/handoff: " + err.Error(), nil
	}
	if status != http.StatusOK {
		return nil, fmt.Sprintf("primary /narwhal/handoff: status %d", status), nil
	}
	doc, err := Decode(body)
	if err == nil {
		err = doc.Validate(f.Engines, f.Policy)
	}
	var ve *VersionError
	if errors.As(err, &ve) {
		return nil, "", fmt.Errorf("standby of %s: %w; run the same narwhal build as the primary", f.Primary, err)
	}
	if err != nil {
		return nil, "primary /narwhal/handoff: " + err.Error(), nil
	}
	return doc, "", nil
}

// get fetches one URL, bounded by ProbeTimeout and ctx.
func (f *Follower) get(ctx context.Context, path string, limit int64) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, orDefault(f.ProbeTimeout, DefaultProbeTimeout))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.Primary+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := f.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return 0, nil, err
	}
	if int64(len(body)) > limit {
		return 0, nil, fmt.Errorf("body larger than %d bytes", limit)
	}
	return resp.StatusCode, body, nil
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
)

// routerCheck is what --router found: whether the running router took
// the store this run wrote.
type routerCheck struct {
	URL    string `json:"url"`
	Want   string `json:"digest"`          // the written file's digest
	Served string `json:"served_digest"`   // what the router says it loaded
	Taken  bool   `json:"taken"`           // Served == Want
	Error  string `json:"error,omitempty"` // the router's profiles.error, or why it could not be asked
}

// checkRouterURL validates --router.
func checkRouterURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return cli.Usage("--router %q: want the router's base URL, e.g. http://127.0.0.1:8000", raw)
	}
	return nil
}

// awaitRouter asks the router at base for /narwhal/state until its
// profiles.digest is the digest of the file at path, for up to wait: the
// router re-reads profiles.path at its next monitor pass after the file
// changed.
func awaitRouter(ctx context.Context, base, path string, wait time.Duration) routerCheck {
	rc := routerCheck{URL: base}
	b, err := os.ReadFile(path)
	if err != nil {
		rc.Error = err.Error()
		return rc
	}
	rc.Want = profile.FileDigest(b)
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := routerProfiles(ctx, base)
		if err == nil {
			rc.Served, rc.Error = st.Digest, st.Error
			if rc.Taken = st.Digest == rc.Want; rc.Taken {
				return rc
			}
		} else {
			rc.Error = err.Error()
		}
		select {
		case <-ctx.Done():
			return rc
		case <-tick.C:
		}
	}
}

// routerProfiles is GET base/narwhal/state's profiles section.
func routerProfiles(ctx context.Context, base string) (routerdoc.ProfilesState, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/narwhal/state", nil)
	if err != nil {
		return routerdoc.ProfilesState{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return routerdoc.ProfilesState{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return routerdoc.ProfilesState{}, fmt.Errorf("GET /narwhal/state: %s", resp.Status)
	}
	var doc struct {
		Profiles routerdoc.ProfilesState `json:"profiles"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&doc); err != nil {
		return routerdoc.ProfilesState{}, fmt.Errorf("GET /narwhal/state: %w", err)
	}
	return doc.Profiles, nil
}

// line is what the operator reads.
func (rc routerCheck) line(wait time.Duration) string {
	if rc.Taken {
		return fmt.Sprintf("router %s has taken the new profiles (digest %s)", rc.URL, rc.Want)
	}
	why := ""
	if rc.Error != "" {
		why = "; it says: " + rc.Error
	}
	return fmt.Sprintf("router %s has not taken the new profiles within %s: it serves digest %q, the file is %s (is its fleet's profiles.path this --out? an older router that does not re-read needs a restart)%s",
		rc.URL, wait, rc.Served, rc.Want, why)
}

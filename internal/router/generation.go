package router

import "github.com/narwhal-go/narwhal/internal/profile"

// profileGenerations maps iid → the loaded row's generation_digest, for
// the rows that carry one: the supervisor holds engines to them
// (avail/generation.go).
func profileGenerations(st *profile.Store) map[string]string {
	out := map[string]string{}
	for _, row := range st.Profiles {
		if row.GenerationDigest != nil {
			out[row.IID] = *row.GenerationDigest
		}
	}
	return out
}

package sweep

import (
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

// Two --merge runs that started from the same store (a rolling restart
// re-profiles engines one by one, sometimes at once) each keep the
// other's rows: the merge re-reads the store under its lock. Before, the
// second writer merged into the store it read at its start and dropped
// the first writer's row.
func TestConcurrentMergesKeepEveryRow(t *testing.T) {
	out := filepath.Join(t.TempDir(), "profiles.json")
	start := &profile.Store{Schema: profile.Schema, SchemaVersion: profile.SchemaVersion,
		Profiles: []profile.Row{simengine.DefaultProfile("p0")}}
	if err := profile.Save(out, start); err != nil {
		t.Fatal(err)
	}
	cfg := &fleet.Config{Model: "m"}
	iids := []string{"p1", "d0", "d1"}
	var wg sync.WaitGroup
	for _, iid := range iids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := simengine.DefaultProfile(iid)
			j := Fleet{Config: cfg, Out: out, Prev: start} // each read the store before any wrote
			if n, err := j.Write([]Result{{Row: &row}}); err != nil || n != 1 {
				t.Errorf("merge of %s: %d rows, %v", iid, n, err)
			}
		}()
	}
	wg.Wait()
	st, err := profile.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range st.Profiles {
		got = append(got, r.IID)
	}
	slices.Sort(got)
	if want := []string{"d0", "d1", "p0", "p1"}; !slices.Equal(got, want) {
		t.Fatalf("store after three concurrent merges holds %v, want %v", got, want)
	}
}

package support

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// allObservations is FromStore as it was: every record read.
func allObservations(t *testing.T, st *store.Store) []Observation {
	t.Helper()
	all, err := st.Records()
	if err != nil {
		t.Fatal(err)
	}
	recs, ds := make([]evidence.Record, len(all)), make([]string, len(all))
	for i, s := range all {
		recs[i], ds[i] = s.Record, s.Digest
	}
	return Observations(recs, ds)
}

// TestFromStoreEqualsFullScan: support observations found through the
// index are those of a full scan, in the same order, for records written
// with the index, without it (an older build), and after the index is
// lost; and a damaged record that is not a support record is not read.
func TestFromStoreEqualsFullScan(t *testing.T) {
	marks := []Mark{
		{Key: key("Qwen3ForCausalLM", "sm_75", "x86_64"), State: RecognizedButFailed, Inputs: []string{"1220" + strings.Repeat("ab", 32)}, Level: evidence.CommunityReported},
		{Key: key("Qwen3ForCausalLM", "sm_75", "x86_64"), State: Unsupported, Level: evidence.MaintainerLabMeasured},
		{Key: key("AcmeForCausalLMv2Model", "sm_90", "x86_64"), State: Plugin, Plugin: "acme-vllm@1.2.0", Level: evidence.CommunityReported},
		{Key: key("Qwen3ForCausalLM", "sm_90", "aarch64"), State: NativeVLLM, Level: evidence.CommunityReported},
	}
	cases := []struct {
		name string
		put  func(t *testing.T, st *store.Store, r evidence.Record)
		harm func(st *store.Store)
	}{
		{"with the index", putRecord, func(*store.Store) {}},
		{"older build without the index", writeRecord, func(*store.Store) {}},
		{"index lost", putRecord, func(st *store.Store) { os.RemoveAll(filepath.Join(st.Root, "index")) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := store.Open(t.TempDir())
			clock := ports.NewFake(time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC))
			for _, m := range marks {
				r, err := NewRecord(m, clock)
				if err != nil {
					t.Fatal(err)
				}
				c.put(t, st, r)
				clock.Advance(time.Minute)
				c.put(t, st, otherRecord(clock))
			}
			c.harm(st)
			got, err := FromStore(st)
			if err != nil {
				t.Fatal(err)
			}
			if want := allObservations(t, st); len(got) != len(marks) || !reflect.DeepEqual(got, want) {
				t.Fatalf("FromStore\n%+v\nfull scan\n%+v", got, want)
			}
		})
	}
}

func TestFromStoreSkipsOtherRecords(t *testing.T) {
	st := store.Open(t.TempDir())
	clock := ports.NewFake(time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC))
	d, err := st.PutRecord(otherRecord(clock))
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	b, _, _ := evidence.Encode(otherRecord(clock))
	if err := os.WriteFile(filepath.Join(st.Root, "records", d+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if obs, err := FromStore(st); err != nil || len(obs) != 0 {
		t.Fatalf("a damaged boot record broke the support lookup: %v %v", obs, err)
	}
}

func putRecord(t *testing.T, st *store.Store, r evidence.Record) {
	t.Helper()
	if _, err := st.PutRecord(r); err != nil {
		t.Fatal(err)
	}
}

func writeRecord(t *testing.T, st *store.Store, r evidence.Record) {
	t.Helper()
	b, d, err := evidence.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(st.Root, "records"), 0o755)
	if err := os.WriteFile(filepath.Join(st.Root, "records", d+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// otherRecord is a boot record on the same architecture subject keys
// that is not a support record.
func otherRecord(clock ports.Clock) evidence.Record {
	v := evidence.VerdictHealthy
	return evidence.Stamp(evidence.Record{Kind: evidence.KindBoot, ClaimScope: evidence.ScopeBoot, EpistemicStatus: evidence.Measured,
		Level: evidence.CommunityReported, Subject: map[string]string{SubjectArch: "Qwen3ForCausalLM", SubjectGPUArch: "sm_75"},
		Claim: evidence.Claim{Quantity: "boot", Verdict: &v}, Engine: evidence.Engine{Name: "vllm", Version: "0.11.0", Packages: []string{}},
		Provenance: evidence.Provenance{Producer: "test", Inputs: []string{}}, Display: map[string]any{}}, clock)
}

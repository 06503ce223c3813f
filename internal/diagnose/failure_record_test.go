package diagnose

import (
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/ports"
)

const frUnknownLog = `(EngineCore_DP0 pid=7) ERROR 09-10 12:00:00 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=7) ERROR 09-10 12:00:00 [core.py:708] Traceback (most recent call last):
(EngineCore_DP0 pid=7) ERROR 09-10 12:00:00 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 699, in run_engine_core
(EngineCore_DP0 pid=7) ERROR 09-10 12:00:00 [core.py:708]     engine_core = EngineCoreProc(*args, **kwargs)
(EngineCore_DP0 pid=7) ERROR 09-10 12:00:00 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/frobnicate.py", line 12, in frob
(EngineCore_DP0 pid=7) ERROR 09-10 12:00:00 [core.py:708]     raise KeyError(
(EngineCore_DP0 pid=7) ERROR 09-10 12:00:00 [core.py:708] KeyError: 'the flux capacitor 42 is missing'
`

// INV-10: an unrecognized failure is stored with its sanitized facts,
// never forced into a family; the record is byte-identical for identical
// inputs and decodes back.
func TestFailureRecordUnrecognizedStored(t *testing.T) {
	d, err := Diagnose(strings.NewReader(frUnknownLog), Options{})
	if err != nil || d.Status != StatusUnrecognized {
		t.Fatalf("diagnosis %+v %v", d, err)
	}
	rem, err := Remediate(d, Input{})
	if err != nil {
		t.Fatal(err)
	}
	logDigest := canon.DigestPrefix + strings.Repeat("ab", 32)
	clock := ports.NewFake(time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC))
	var digests []string
	for range 2 {
		f, err := NewFailure(d, rem, logDigest)
		if err != nil {
			t.Fatal(err)
		}
		r, err := f.Record(clock)
		if err != nil {
			t.Fatal(err)
		}
		_, dg, err := evidence.Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, dg)
		back, err := DecodeFailure(r)
		if err != nil || back.Family != FamilyUnrecognized || back.Status != StatusUnrecognized || back.LogDigest != logDigest {
			t.Fatalf("decoded %+v %v", back, err)
		}
		if *r.Claim.Verdict != string(FamilyUnrecognized) || r.Subject[SubjectFailure] != d.FingerprintDigest {
			t.Fatalf("envelope %+v", r)
		}
	}
	if digests[0] != digests[1] {
		t.Fatalf("identical inputs gave records %s and %s", digests[0], digests[1])
	}
	if _, err := NewFailure(Diagnosis{Status: StatusNoFailure}, rem, logDigest); err == nil {
		t.Fatal("a log without a failure made a failure record")
	}
}

package vllmrel

import (
	"testing"
	"time"
)

func TestShippedIndexParses(t *testing.T) {
	ix := Shipped()
	if len(ix.Releases) == 0 {
		t.Fatal("the shipped index is empty")
	}
}

func TestAsOfHidesLaterReleases(t *testing.T) {
	ix, err := Parse([]byte(`{"schema":"narwhal.vllm-releases","schema_version":1,"source":"t","releases":[{"version":"0.22.0","date":"2026-03-01"},{"version":"0.21.0","date":"2026-02-01"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := ix.AsOf(time.Date(2026, 2, 15, 0, 0, 0, 0, time.UTC)); len(got) != 1 || got[0].String() != "0.21.0" {
		t.Fatalf("as of mid-February: %v, want only 0.21.0", got)
	}
	if got := ix.AsOf(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)); len(got) != 2 {
		t.Fatalf("as of the release day: %v, want both", got)
	}
}

func TestParseRejectsBadDate(t *testing.T) {
	if _, err := Parse([]byte(`{"schema":"narwhal.vllm-releases","schema_version":1,"source":"t","releases":[{"version":"0.22.0","date":"March"}]}`)); err == nil {
		t.Fatal("a date that is not YYYY-MM-DD was accepted")
	}
}

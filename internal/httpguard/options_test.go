package httpguard

import (
	"testing"
	"time"
)

func TestOptionsWithDefaults(t *testing.T) {
	got := Options{BodyReadsPerClient: 3, IdleTimeout: -time.Second}.WithDefaults()
	want := Options{BodyReadTimeout: DefaultBodyReadTimeout, BodyReadsPerClient: 3,
		ReadHeaderTimeout: DefaultReadHeaderTimeout, IdleTimeout: DefaultIdleTimeout}
	if got != want {
		t.Errorf("%+v, want %+v", got, want)
	}
}

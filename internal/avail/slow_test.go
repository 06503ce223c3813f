package avail

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// slowAttestation is an engine whose attestation sidecar answers after
// delay; every other probe passes at once.
type slowAttestation struct {
	fakeProbes
	delay time.Duration
}

func (p slowAttestation) Attestation(ctx context.Context, _ string) (string, error) {
	select {
	case <-time.After(p.delay):
		return "", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (p slowAttestation) Transfer(context.Context, string, string) error { return nil }

// A contracted readmission whose attestation takes 20 s delays nothing
// else: every MonitorPass returns at once while the gates run, so the
// role control and the handoff write the router runs around it in its
// monitor pass (router/control.go) keep their 1 s interval, and the
// engine is readmitted when the gates pass. Time is synctest's: the 20 s
// are virtual.
func TestASlowReadmissionDelaysNoMonitorPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const pass = time.Second
		f := newFixture(t, 0, slowAttestation{delay: 20 * time.Second})
		f.s.clock, f.s.epoch = ports.SystemClock(), time.Now()
		f.s.cfg.EngineContract = &fleet.EngineContract{}
		f.s.eject("d0", "connection", false) // its probe is due every readmit_every (10) passes

		started := time.Now()
		var probeAt time.Time // when the readmission job was first seen running
		for n := 0; n < 40 && !f.s.Usable("d0"); n++ {
			begin := time.Now()
			f.s.MonitorPass()
			if took := time.Since(begin); took != 0 {
				t.Fatalf("pass %d took %v: it waited for the readmission", n, took)
			}
			if probeAt.IsZero() && f.s.Probing("d0") {
				probeAt = time.Now()
			}
			time.Sleep(pass)
			synctest.Wait() // the readmission job has done all it can by now
		}
		elapsed := time.Since(started)
		if probeAt.IsZero() || !f.s.Usable("d0") {
			t.Fatalf("d0 not readmitted after %v (job seen at %v)", elapsed, probeAt)
		}
		// The gates answered after 20 s; a pass ran every second meanwhile.
		if gated := time.Since(probeAt); gated < 20*pass || gated > 21*pass {
			t.Errorf("readmitted %v after its job started, want the attestation's 20 s (+ a pass)", gated)
		}
	})
}

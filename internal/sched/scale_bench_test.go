package sched

import (
	"fmt"
	"testing"
)

// The sizes docs/scale.md reports: one router's fleet of 8, 32 and 128
// engines (a quarter prefill), with 16 resident requests per engine.
var scaleSizes = []int{8, 32, 128}

func scaleSpecs(n int) []string {
	specs := make([]string, n)
	for k := range specs {
		role := "decode"
		if k%4 == 0 {
			role = "prefill"
		}
		specs[k] = fmt.Sprintf("e%03d:%s", k, role)
	}
	return specs
}

// One request's placement: its prefill and its decode decision.
func BenchmarkScalePlace(b *testing.B) {
	for _, n := range scaleSizes {
		b.Run(fmt.Sprintf("engines=%d", n), func(b *testing.B) {
			c := newCore(b, scaleSpecs(n)...)
			for k := 0; k < 16*n; k++ {
				id := fmt.Sprintf("r%d", k)
				c.Track(0, req(id, 500+k%2000, 100))
				phase := Decode
				if k%n%4 == 0 {
					phase = Prefill
				}
				c.dispatched(0, fmt.Sprintf("e%03d", k%n), id, phase)
			}
			r := c.Track(0, req("new", 1000, 100))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, ref := c.choosePrefill(r, nil); ref != nil {
					b.Fatal(ref)
				}
				if _, ref := c.chooseDecode(r, nil); ref != nil {
					b.Fatal(ref)
				}
			}
		})
	}
}

// One controller pass with a full demand window (reactive policy).
func BenchmarkScaleTick(b *testing.B) {
	for _, n := range scaleSizes {
		b.Run(fmt.Sprintf("engines=%d", n), func(b *testing.B) {
			c := newCore(b, scaleSpecs(n)...)
			c.opt.Policy = PolicyReactive
			rate := 6 * n // arrivals per second grow with the fleet
			drive(c, 0, 120, rate, 1500, 200)
			now, step := 120.0, c.opt.Controller.Reactive.StepS
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				offer(c, now, step, rate, 1500+i%7*300, 200)
				now += step
				b.StartTimer()
				c.Tick(now)
			}
		})
	}
}

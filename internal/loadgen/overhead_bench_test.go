package loadgen

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/simengine"
)

// BenchmarkClientOverhead1000Streams offers 1,000 concurrent streams
// straight to one simulated engine (no router) and compares what the
// client measured with what the engine itself recorded for the same
// requests (its vllm:time_to_first_token_seconds and
// vllm:inter_token_latency_seconds histograms): the difference is what
// the client side adds, transport included. docs/bench.md quotes a run.
//
//	go test -run X -bench ClientOverhead -benchtime 1x ./internal/loadgen/
func BenchmarkClientOverhead1000Streams(b *testing.B) {
	const streams, out = 1000, 64
	e, err := simengine.Start(simengine.Config{Model: "m", Profile: simengine.DefaultProfile("sim"),
		MaxNumSeqs: streams, KVCapacityTokens: 400_000})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	s := Schedule{Source: "trace", Steps: []Step{{Rate: streams / 0.5, DurationS: 0.5, Offered: streams}}}
	for i := range streams {
		s.Offers = append(s.Offers, Offer{At: float64(i) * 0.5 / streams, InputLen: 32, OutputLen: out})
	}
	for range b.N {
		var before, after syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &before)
		g, err := New(Config{Router: e.URL(), Model: "m", Schedule: s, Limit: streams, RequestTimeout: 2 * time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		recs, err := g.Run(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		wall := time.Since(start).Seconds()
		syscall.Getrusage(syscall.RUSAGE_SELF, &after)
		report(b, recs, engineMeans(b, e.URL()), wall, cpuSeconds(after)-cpuSeconds(before))
	}
}

func report(b *testing.B, recs []Record, eng map[string]float64, wall, cpu float64) {
	var ttft, tpot, lag float64
	n, tokens := 0, 0
	for _, r := range recs {
		if r.Outcome != OutcomeCompleted {
			b.Fatalf("request %s: %s %s", r.ID, r.Outcome, r.Error)
		}
		ttft, tpot, n = ttft+*r.TTFT, tpot+*r.TPOT, n+1
		tokens += r.OutputLen
		lag = max(lag, r.ScheduleLag)
	}
	ct, cp := ttft/float64(n), tpot/float64(n)
	b.ReportMetric(1000*ct, "client-ttft-ms")
	b.ReportMetric(1000*eng["vllm:time_to_first_token_seconds"], "engine-ttft-ms")
	b.ReportMetric(1000*cp, "client-tpot-ms")
	b.ReportMetric(1000*eng["vllm:inter_token_latency_seconds"], "engine-itl-ms")
	b.ReportMetric(1000*lag, "max-sched-lag-ms")
	b.ReportMetric(float64(tokens)/wall, "tokens/s")
	b.ReportMetric(1e6*cpu/float64(tokens), "process-cpu-us/token")
}

// engineMeans reads the engine's histogram sums and counts.
func engineMeans(b *testing.B, base string) map[string]float64 {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sums, counts := map[string]float64{}, map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		_ = rest
		if err != nil {
			continue
		}
		if base, ok := strings.CutSuffix(name, "_sum"); ok {
			sums[base] = v
		} else if base, ok := strings.CutSuffix(name, "_count"); ok {
			counts[base] = v
		}
	}
	means := map[string]float64{}
	for k, s := range sums {
		if counts[k] > 0 {
			means[k] = s / counts[k]
		}
	}
	return means
}

func cpuSeconds(r syscall.Rusage) float64 {
	return float64(r.Utime.Sec+r.Stime.Sec) + float64(r.Utime.Usec+r.Stime.Usec)/1e6
}

// BenchmarkReadStream is the client's own cost per streamed token:
// parsing one 64-token SSE body as the router sends it.
func BenchmarkReadStream(b *testing.B) {
	var sb strings.Builder
	for i := range 64 {
		fmt.Fprintf(&sb, "data: {\"id\":\"cmpl-x\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" tok%d\",\"logprobs\":null,\"finish_reason\":null}]}\n\n", i)
	}
	sb.WriteString("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":32,\"completion_tokens\":64}}\n\ndata: [DONE]\n\n")
	body := sb.String()
	g := &Generator{}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for range b.N {
		rec := Record{WantedLen: 64}
		g.readStream(context.Background(), &rec, io.NopCloser(strings.NewReader(body)), time.Now())
		if rec.Outcome != OutcomeCompleted {
			b.Fatal(rec.Outcome)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/64, "ns/token")
}

package tsdb

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
)

// The native-histogram workload of the histogram benchmarks: hwTargets
// targets scraped every 15 s for six hours. Each target exposes ten
// exponential (schema 3) counter histograms of a log-normal latency, two
// exponential gauge histograms, two NHCB counter histograms and three floats
// (up, a counter, a gauge). A target restarts about every four hours: all
// its counters reset together.
const (
	hwTargets  = 20
	hwScrapes  = 1440
	hwInterval = int64(15000)
	hwStart    = int64(1_789_992_000_000) // a multiple of 6 h: the 2 h blocks compact into one on both sides
)

// hwNHCBBounds are the custom bounds of the NHCB histograms.
var hwNHCBBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// hwSeries is one series of the workload: hs (histograms) or fs (floats) has
// one value per scrape.
type hwSeries struct {
	lset labels.Labels
	hs   []*histogram.Histogram
	fs   []float64
}

// histWorkload is the generated data, series grouped by target.
type histWorkload struct {
	targets      [][]hwSeries
	offset       []int64 // each target's scrape offset in ms
	histSamples  int
	floatSamples int
}

// t returns the timestamp of scrape i of target tg.
func (w *histWorkload) t(tg, i int) int64 { return hwStart + int64(i)*hwInterval + w.offset[tg] }

// mint and maxt bound the data (maxt exclusive, at the end of the six hours).
func (w *histWorkload) mint() int64 { return hwStart }
func (w *histWorkload) maxt() int64 { return hwStart + hwScrapes*hwInterval }

var (
	hwOnce sync.Once
	hwData *histWorkload
)

// histBenchWorkload returns the workload, generated once per test binary.
func histBenchWorkload() *histWorkload {
	hwOnce.Do(func() { hwData = genHistWorkload(7) })
	return hwData
}

// hwBucketOffset shifts schema-3 bucket indexes (about -300…300 for the
// latencies generated) to positions of hwGen.pos.
const hwBucketOffset = 512

// hwGen simulates one histogram series: observations bucketed at schema 3
// (pos[index+hwBucketOffset]) or into the NHCB bounds (pos[0..len(bounds)]).
type hwGen struct {
	rng     *rand.Rand
	custom  []float64
	gauge   bool // a gauge histogram: counts of the last interval only
	pos     []int64
	count   uint64
	sum     float64
	mu, sig float64 // log-normal parameters, mu drifting slowly
	rate    float64 // mean observations per scrape
}

func (g *hwGen) reset() {
	clear(g.pos)
	g.count, g.sum = 0, 0
}

// next returns the histogram after one more scrape interval.
func (g *hwGen) next(restarted bool) *histogram.Histogram {
	hint := histogram.UnknownCounterReset
	switch {
	case g.gauge:
		g.reset()
		hint = histogram.GaugeType
	case restarted:
		g.reset()
		hint = histogram.CounterReset
	}
	g.mu += 0.01 * g.rng.NormFloat64()
	n := int(math.Round(g.rate + math.Sqrt(g.rate)*g.rng.NormFloat64())) // Poisson, roughly
	for range max(n, 0) {
		v := math.Exp(g.mu + g.sig*g.rng.NormFloat64())
		g.count++
		g.sum += v
		if g.custom != nil {
			g.pos[sortSearch(g.custom, v)]++
		} else {
			i := int(math.Ceil(math.Log2(v)*8)) + hwBucketOffset
			g.pos[min(max(i, 0), len(g.pos)-1)]++
		}
	}
	h := &histogram.Histogram{CounterResetHint: hint, Count: g.count, Sum: g.sum}
	if g.custom != nil {
		h.Schema = histogram.CustomBucketsSchema
		h.CustomValues = g.custom
		h.PositiveSpans = []histogram.Span{{Offset: 0, Length: uint32(len(g.custom) + 1)}}
		prev := int64(0)
		for i := range len(g.custom) + 1 {
			c := g.pos[i]
			h.PositiveBuckets = append(h.PositiveBuckets, c-prev)
			prev = c
		}
		return h
	}
	h.Schema = 3
	h.ZeroThreshold = 2.938735877055719e-39
	h.PositiveSpans, h.PositiveBuckets = hwSpans(g.pos)
	return h
}

// sortSearch returns the index of the first bound >= v (len(bounds) for +Inf).
func sortSearch(bounds []float64, v float64) int {
	i, _ := slices.BinarySearch(bounds, v)
	return i
}

// hwSpans turns bucket counts into spans and deltas, filling gaps of up to
// two empty buckets as client_golang does.
func hwSpans(counts []int64) ([]histogram.Span, []int64) {
	var idx []int32
	for i, c := range counts {
		if c != 0 {
			idx = append(idx, int32(i-hwBucketOffset))
		}
	}
	var spans []histogram.Span
	var deltas []int64
	var prev int64
	for j, i := range idx {
		switch {
		case j == 0:
			spans = append(spans, histogram.Span{Offset: i, Length: 1})
		case i-idx[j-1] <= 3:
			for range i - idx[j-1] - 1 {
				deltas = append(deltas, -prev)
				prev = 0
			}
			spans[len(spans)-1].Length += uint32(i - idx[j-1])
		default:
			spans = append(spans, histogram.Span{Offset: i - idx[j-1] - 1, Length: 1})
		}
		c := counts[i+hwBucketOffset]
		deltas = append(deltas, c-prev)
		prev = c
	}
	return spans, deltas
}

func genHistWorkload(seed uint64) *histWorkload {
	w := &histWorkload{}
	for tg := range hwTargets {
		rng := rand.New(rand.NewPCG(seed, uint64(tg)))
		inst := fmt.Sprintf("host-%d:8080", tg)
		lbl := func(name string, kv ...string) labels.Labels {
			return labels.FromStrings(append([]string{"__name__", name, "job", "api", "instance", inst}, kv...)...)
		}
		var gens []*hwGen
		var ss []hwSeries
		for m := range 10 {
			gens = append(gens, &hwGen{mu: math.Log(0.004 * float64(1+m%5)), sig: 0.5 + 0.15*float64(m%4), rate: 50 + 15*float64(m)})
			ss = append(ss, hwSeries{lset: lbl("rpc_duration_seconds", "method", fmt.Sprintf("m%d", m))})
		}
		for q := range 2 {
			gens = append(gens, &hwGen{gauge: true, mu: math.Log(0.05), sig: 1.2, rate: 80 + 40*float64(q)})
			ss = append(ss, hwSeries{lset: lbl("queue_wait_seconds", "queue", fmt.Sprintf("q%d", q))})
		}
		for hi, h := range []string{"/api", "/ui"} {
			gens = append(gens, &hwGen{custom: hwNHCBBounds, mu: math.Log(0.08 * float64(1+hi)), sig: 1, rate: 120})
			ss = append(ss, hwSeries{lset: lbl("http_request_duration_seconds", "handler", h)})
		}
		for _, g := range gens {
			g.rng = rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
			g.pos = make([]int64, 2*hwBucketOffset)
		}
		up, cpu, mem := hwSeries{lset: lbl("up")}, hwSeries{lset: lbl("process_cpu_seconds_total")}, hwSeries{lset: lbl("process_resident_memory_bytes")}
		cpuV, memV := 0.0, 60e6
		for i := range hwScrapes {
			restarted := i > 0 && rng.IntN(960) == 0
			for k, g := range gens {
				ss[k].hs = append(ss[k].hs, g.next(restarted))
			}
			if restarted {
				cpuV, memV = 0, 60e6
			}
			cpuV += math.Round((0.15+0.05*rng.NormFloat64())*15*100) / 100
			memV = math.Max(20e6, memV+float64(4096*int(rng.NormFloat64()*50)))
			up.fs = append(up.fs, 1)
			cpu.fs = append(cpu.fs, math.Max(cpuV, 0))
			mem.fs = append(mem.fs, memV)
		}
		ss = append(ss, up, cpu, mem)
		w.targets = append(w.targets, ss)
		w.offset = append(w.offset, int64(rng.IntN(15000)))
		w.histSamples += len(gens) * hwScrapes
		w.floatSamples += 3 * hwScrapes
	}
	return w
}

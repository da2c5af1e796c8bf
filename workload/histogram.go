package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
)

// NHCBBounds are the custom bucket bounds of the generator's NHCB series.
var NHCBBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// HistogramOptions configures a HistogramGenerator.
type HistogramOptions struct {
	Targets  int           // number of targets (instance host-N:8080); default 20
	Scrapes  int           // scrapes per target; default 1440 (6 h at 15 s)
	Interval time.Duration // scrape interval; default 15s
	Start    time.Time     // time of the first round; default now - Scrapes*Interval
	Seed     uint64        // equal options give equal output
}

// The series of every target of the histogram workload, in Ref order.
const (
	histCounters   = 10 // rpc_duration_seconds{method}: schema-3 counter histograms
	histGauges     = 2  // queue_wait_seconds{queue}: schema-3 gauge histograms
	histNHCB       = 2  // http_request_duration_seconds{handler}: NHCB counter histograms
	histFloats     = 3  // up, process_cpu_seconds_total, process_resident_memory_bytes
	histPerTarget  = histCounters + histGauges + histNHCB
	histBucketBase = 512 // shifts schema-3 bucket indexes (about -300…300 here) to slice positions
)

var (
	metaHist      = &Metadata{Type: model.MetricTypeHistogram, Help: "Latency of requests.", Unit: "seconds"}
	metaGaugeHist = &Metadata{Type: model.MetricTypeGaugeHistogram, Help: "Wait of the last interval.", Unit: "seconds"}
	metaUp        = &Metadata{Type: model.MetricTypeGauge, Help: "Whether the target is up."}
	metaCPU       = &Metadata{Type: model.MetricTypeCounter, Help: "CPU time.", Unit: "seconds"}
	metaMem       = &Metadata{Type: model.MetricTypeGauge, Help: "Resident memory.", Unit: "bytes"}
)

// HistogramGenerator produces a native-histogram workload one round (one
// scrape of every target) at a time. Each target exposes 10 schema-3
// counter histograms of log-normal latencies (drifting, so buckets appear
// and disappear), 2 schema-3 gauge histograms, 2 NHCB counter histograms
// (NHCBBounds) and 3 floats; a target restarts (its counters reset) about
// every 4 h of scrapes.
type HistogramGenerator struct {
	opts    HistogramOptions
	k       int
	targets []*histTarget
}

type histTarget struct {
	inst       string
	offset     int64 // ms after the round's start
	rng        *rand.Rand
	lsets      []labels.Labels
	gens       []*histSeriesGen
	cpu, mem   float64
	restartGap int
}

// histSeriesGen simulates one histogram series.
type histSeriesGen struct {
	rng     *rand.Rand
	custom  []float64 // NHCB bounds; nil for schema 3
	gauge   bool
	counts  []int64 // cumulative observations per bucket (gauges: this interval)
	count   uint64
	sum     float64
	mu, sig float64 // log-normal parameters; mu drifts
	rate    float64 // mean observations per scrape
}

// NewHistogramGenerator returns a generator for opts.
func NewHistogramGenerator(opts HistogramOptions) *HistogramGenerator {
	if opts.Targets <= 0 {
		opts.Targets = 20
	}
	if opts.Scrapes <= 0 {
		opts.Scrapes = 1440
	}
	if opts.Interval <= 0 {
		opts.Interval = 15 * time.Second
	}
	if opts.Start.IsZero() {
		opts.Start = time.Now().Add(-time.Duration(opts.Scrapes) * opts.Interval).Truncate(time.Second)
	}
	g := &HistogramGenerator{opts: opts}
	for tg := range opts.Targets {
		rng := rand.New(rand.NewPCG(opts.Seed, uint64(tg)+1))
		t := &histTarget{inst: fmt.Sprintf("host-%d:8080", tg), rng: rng, mem: 60e6}
		lbl := func(name string, kv ...string) labels.Labels {
			return labels.FromStrings(append([]string{"__name__", name, "instance", t.inst, "job", "api"}, kv...)...)
		}
		for m := range histCounters {
			t.gens = append(t.gens, &histSeriesGen{mu: math.Log(0.004 * float64(1+m%5)), sig: 0.5 + 0.15*float64(m%4), rate: 50 + 15*float64(m)})
			t.lsets = append(t.lsets, lbl("rpc_duration_seconds", "method", fmt.Sprintf("m%d", m)))
		}
		for q := range histGauges {
			t.gens = append(t.gens, &histSeriesGen{gauge: true, mu: math.Log(0.05), sig: 1.2, rate: 80 + 40*float64(q)})
			t.lsets = append(t.lsets, lbl("queue_wait_seconds", "queue", fmt.Sprintf("q%d", q)))
		}
		for i, h := range []string{"/api", "/ui"} {
			t.gens = append(t.gens, &histSeriesGen{custom: NHCBBounds, mu: math.Log(0.08 * float64(1+i)), sig: 1, rate: 120})
			t.lsets = append(t.lsets, lbl("http_request_duration_seconds", "handler", h))
		}
		t.lsets = append(t.lsets, lbl("up"), lbl("process_cpu_seconds_total"), lbl("process_resident_memory_bytes"))
		for _, sg := range t.gens {
			sg.rng = rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
			sg.counts = make([]int64, 2*histBucketBase)
		}
		t.offset = rng.Int64N(opts.Interval.Milliseconds())
		g.targets = append(g.targets, t)
	}
	return g
}

// SeriesPerTarget is the number of series each target exposes.
func (g *HistogramGenerator) SeriesPerTarget() int { return histPerTarget + histFloats }

// HistogramSeriesPerTarget is the number of histogram series of each target.
func (g *HistogramGenerator) HistogramSeriesPerTarget() int { return histPerTarget }

// Options returns the generator's options with defaults applied.
func (g *HistogramGenerator) Options() HistogramOptions { return g.opts }

// Next returns the next round: one scrape per target ordered by timestamp;
// nil after the last round. Histogram samples have H set, floats V.
func (g *HistogramGenerator) Next() []Scrape {
	if g.k >= g.opts.Scrapes {
		return nil
	}
	k := g.k
	g.k++
	n := g.SeriesPerTarget()
	base := g.opts.Start.UnixMilli() + int64(k)*g.opts.Interval.Milliseconds()
	out := make([]Scrape, 0, len(g.targets))
	for tg, t := range g.targets {
		restarted := k > 0 && t.rng.IntN(960) == 0
		sc := Scrape{Target: tg, Instance: t.inst, T: base + t.offset, Samples: make([]Sample, n)}
		for i, sg := range t.gens {
			meta := metaHist
			if sg.gauge {
				meta = metaGaugeHist
			}
			sc.Samples[i] = Sample{Ref: uint64(tg*n + i), Labels: t.lsets[i], Meta: meta, H: sg.next(restarted)}
		}
		if restarted {
			t.cpu, t.mem = 0, 60e6
		}
		t.cpu += math.Max(math.Round((0.15+0.05*t.rng.NormFloat64())*15*100)/100, 0)
		t.mem = math.Max(20e6, t.mem+float64(4096*int(t.rng.NormFloat64()*50)))
		for j, f := range []struct {
			v float64
			m *Metadata
		}{{1, metaUp}, {t.cpu, metaCPU}, {t.mem, metaMem}} {
			i := histPerTarget + j
			sc.Samples[i] = Sample{Ref: uint64(tg*n + i), Labels: t.lsets[i], Meta: f.m, V: f.v}
		}
		out = append(out, sc)
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].T < out[b].T })
	return out
}

// next observes one scrape interval's worth of values and returns the histogram.
func (g *histSeriesGen) next(restarted bool) *histogram.Histogram {
	hint := histogram.UnknownCounterReset
	switch {
	case g.gauge:
		clear(g.counts)
		g.count, g.sum = 0, 0
		hint = histogram.GaugeType
	case restarted:
		clear(g.counts)
		g.count, g.sum = 0, 0
		hint = histogram.CounterReset
	}
	g.mu += 0.01 * g.rng.NormFloat64()
	n := int(math.Round(g.rate + math.Sqrt(g.rate)*g.rng.NormFloat64())) // roughly Poisson
	for range max(n, 0) {
		v := math.Exp(g.mu + g.sig*g.rng.NormFloat64())
		g.count++
		g.sum += v
		if g.custom != nil {
			i, _ := slices.BinarySearch(g.custom, v)
			g.counts[i]++
		} else {
			i := int(math.Ceil(math.Log2(v)*8)) + histBucketBase
			g.counts[min(max(i, 0), len(g.counts)-1)]++
		}
	}
	h := &histogram.Histogram{CounterResetHint: hint, Count: g.count, Sum: g.sum}
	if g.custom != nil {
		h.Schema = histogram.CustomBucketsSchema
		h.CustomValues = g.custom
		h.PositiveSpans = []histogram.Span{{Offset: 0, Length: uint32(len(g.custom) + 1)}}
		prev := int64(0)
		for _, c := range g.counts[:len(g.custom)+1] {
			h.PositiveBuckets = append(h.PositiveBuckets, c-prev)
			prev = c
		}
		return h
	}
	h.Schema = 3
	h.ZeroThreshold = 2.938735877055719e-39
	h.PositiveSpans, h.PositiveBuckets = expSpans(g.counts)
	return h
}

// expSpans turns bucket counts (index+histBucketBase) into spans and deltas,
// bridging gaps of up to two empty buckets as client_golang does.
func expSpans(counts []int64) ([]histogram.Span, []int64) {
	var spans []histogram.Span
	var deltas []int64
	var prev int64
	last := int32(0)
	for p, c := range counts {
		if c == 0 {
			continue
		}
		i := int32(p - histBucketBase)
		switch {
		case spans == nil:
			spans = append(spans, histogram.Span{Offset: i, Length: 1})
		case i-last <= 3:
			for range i - last - 1 {
				deltas = append(deltas, -prev)
				prev = 0
			}
			spans[len(spans)-1].Length += uint32(i - last)
		default:
			spans = append(spans, histogram.Span{Offset: i - last - 1, Length: 1})
		}
		deltas = append(deltas, c-prev)
		prev, last = c, i
	}
	return spans, deltas
}

package block

import (
	"math"
	"slices"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
)

// v4Groups is the content of testdata/v4: float groups that version 4 of the
// writer made with ChunkRows 128: v2Groups (constant, stepped decimal, XOR
// with a bitmap gap), and a group with a noisy two-decimal gauge (Rice-coded
// residuals), a member present in a run of rows only and an unaligned member
// whose samples sit 7 ms after the shared rows.
func v4Groups() []Group {
	gs := v2Groups()
	ts := make([]int64, 400)
	for i := range ts {
		ts[i] = 1_700_000_000_000 + int64(i)*15000
	}
	x := uint64(0x9e3779b97f4a7c15)
	noise := func() int64 { // xorshift: noise around a level, deterministic
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if x%20 == 0 { // a spike now and then: fixed-width fields pay for it on every value
			return int64(x>>8%2001) - 1000
		}
		return int64(x>>8%11) - 5
	}
	gauge := Column{Member: 0}
	run := Column{Member: 1}
	for i := range ts {
		gauge.Rows = append(gauge.Rows, int32(i))
		gauge.Values = append(gauge.Values, float64(500000+noise())/100)
		if i >= 150 && i < 260 {
			run.Rows = append(run.Rows, int32(i))
			run.Values = append(run.Values, float64(i*3))
		}
	}
	var uts []int64
	late := Column{Member: 2}
	for i := 0; i < len(ts); i += 9 {
		uts = append(uts, ts[i]+7)
		late.Rows = append(late.Rows, int32(len(uts)-1))
		late.Values = append(late.Values, 0.1*float64(i))
	}
	g3 := Group{
		Key: `instance="c",job="mixed"`,
		Members: []labels.Labels{
			labels.FromStrings("__name__", "gauge_noisy", "instance", "c", "job", "mixed"),
			labels.FromStrings("__name__", "run_only", "instance", "c", "job", "mixed"),
			labels.FromStrings("__name__", "late", "instance", "c", "job", "mixed"),
		},
		Tables: []Table{
			{Timestamps: ts, Columns: []Column{gauge, run}},
			{Timestamps: uts, Columns: []Column{late}},
		},
	}
	return append(gs, g3)
}

// v5Groups is the content of testdata/v5, written by version 5 of the writer
// with ChunkRows 128: v4Groups and a group of native histograms: integer
// histograms of a counter (a layout change, a counter reset, a staleness
// marker's NaN sum, a zero-length span), float histograms of a gauge with
// gaps, custom-bucket histograms in a run of rows, and a series whose floats
// turn into histograms in a table of its own.
func v5Groups() []Group {
	gs := v4Groups()
	const n = 300
	ts := make([]int64, n)
	for i := range ts {
		ts[i] = 1_700_000_000_000 + int64(i)*15000
	}
	lat := Column{Member: 0}
	size := Column{Member: 1}
	nhcb := Column{Member: 2}
	sw := Column{Member: 3}
	custom := []float64{0.01, 0.1, 1, 10}
	var uts []int64
	late := Column{Member: 3}
	for i := range n {
		r := int32(i)
		// Counter: buckets grow by i-dependent amounts, reset at 200; more buckets from 100.
		base := int64(i % 200)
		h := &histogram.Histogram{Schema: 3, ZeroThreshold: 1e-128, ZeroCount: uint64(base),
			PositiveSpans: []histogram.Span{{Offset: -2, Length: 2}, {Offset: 3, Length: 0}, {Offset: 1, Length: 1}}}
		h.PositiveBuckets = []int64{base, base / 2, 3 * base / 2}
		h.NegativeSpans = []histogram.Span{{Offset: 0, Length: 1}}
		h.NegativeBuckets = []int64{base / 3}
		if i >= 100 {
			h.PositiveSpans = append(h.PositiveSpans, histogram.Span{Offset: 2, Length: 2})
			h.PositiveBuckets = append(h.PositiveBuckets, -base, 7)
		}
		var c int64
		for _, d := range h.PositiveBuckets {
			c += d
			h.Count += uint64(c)
		}
		h.Count += uint64(h.NegativeBuckets[0]) + h.ZeroCount
		h.Sum = float64(base) * 0.125
		if i == 200 {
			h.CounterResetHint = histogram.CounterReset
		}
		if i == 250 {
			h.Sum = math.Float64frombits(0x7ff0000000000002) // a staleness marker
		}
		lat.Rows, lat.Histograms = append(lat.Rows, r), append(lat.Histograms, h)
		if i%7 != 3 {
			fh := &histogram.FloatHistogram{CounterResetHint: histogram.GaugeType, Schema: 0, ZeroThreshold: 0.5,
				ZeroCount: float64(i%5) / 4, Count: 10 + float64(i%13)/8, Sum: float64(i) * 1.5,
				PositiveSpans:   []histogram.Span{{Offset: 1, Length: 3}},
				PositiveBuckets: []float64{float64(i%3) + 0.5, 4.25, float64(i%11) / 2}}
			size.Rows, size.FloatHistograms = append(size.Rows, r), append(size.FloatHistograms, fh)
		}
		if i >= 40 && i < 160 {
			ch := &histogram.Histogram{Schema: histogram.CustomBucketsSchema, CustomValues: custom, Count: uint64(i) * 3, Sum: float64(i) / 10,
				PositiveSpans: []histogram.Span{{Offset: 0, Length: 4}}, PositiveBuckets: []int64{int64(i), 0, int64(i), -int64(i)}}
			nhcb.Rows, nhcb.Histograms = append(nhcb.Rows, r), append(nhcb.Histograms, ch)
		}
		if i < n/2 {
			sw.Rows, sw.Values = append(sw.Rows, r), append(sw.Values, float64(i))
		} else if i%2 == 0 {
			late.Rows = append(late.Rows, int32(len(uts)))
			uts = append(uts, ts[i]+7)
			late.Histograms = append(late.Histograms, &histogram.Histogram{Schema: 1, Count: uint64(i), Sum: float64(i),
				PositiveSpans: []histogram.Span{{Offset: 0, Length: 1}}, PositiveBuckets: []int64{int64(i)}})
		}
	}
	g := Group{
		Key: `job="hist"`,
		Members: []labels.Labels{
			labels.FromStrings("__name__", "rpc_latency_seconds", "job", "hist"),
			labels.FromStrings("__name__", "rpc_size_bytes", "job", "hist"),
			labels.FromStrings("__name__", "rpc_nhcb_seconds", "job", "hist"),
			labels.FromStrings("__name__", "switcher", "job", "hist"),
		},
		Tables: []Table{
			{Timestamps: ts, Columns: []Column{lat, size, nhcb, sw}},
			{Timestamps: uts, Columns: []Column{late}},
		},
	}
	return append(gs, g)
}

// v6Starts are the start timestamps of testdata/v6, written by version 6 of
// the writer from v5Groups with ChunkRows 128 and these runs: a counter that
// restarts, an integer histogram counter whose reset starts anew, the
// unaligned "late" series as deltas (each sample starting at the previous
// one), and "switcher" with fixed, unset and offset stretches. Other series
// have none.
func v6Starts(gs []Group) ([]SeriesStarts, map[string][]int64) {
	rule := map[string]func(i int, ts []int64) int64{
		"cpu_seconds_total": func(i int, ts []int64) int64 {
			if i >= 150 {
				return ts[150] - 500
			}
			return ts[0] - 10000
		},
		"rpc_latency_seconds": func(i int, ts []int64) int64 {
			if i >= 200 {
				return ts[200] - 1
			}
			return ts[0] - 60000
		},
		"late": func(i int, ts []int64) int64 {
			if i == 0 {
				return ts[0] - 9*15000
			}
			return ts[i-1]
		},
		"switcher": func(i int, ts []int64) int64 {
			switch {
			case i < 100:
				return ts[0] - 1
			case i < 150:
				return 0
			}
			return ts[i] - 7
		},
	}
	var out []SeriesStarts
	sts := map[string][]int64{}
	for gi := range gs {
		for m, l := range gs[gi].Members {
			var ts []int64
			for _, s := range groupAllSamples(&gs[gi], m) {
				ts = append(ts, s.t)
			}
			st := make([]int64, len(ts))
			if f := rule[l.Get("__name__")]; f != nil {
				for i := range ts {
					st[i] = f(i, ts)
				}
				out = append(out, SeriesStarts{Labels: l, Runs: buildRuns(ts, st)})
			}
			sts[l.String()] = st
		}
	}
	slices.SortFunc(out, func(a, b SeriesStarts) int { return labels.Compare(a.Labels, b.Labels) })
	return out, sts
}

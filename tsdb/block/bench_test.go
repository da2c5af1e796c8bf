package block

import (
	"context"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/tandem-tsdb/tandem/workload"
)

// nodeGroups turns workload scrapes (node_exporter-like: 15 s interval) into one aligned group per target.
func nodeGroups(tb testing.TB, targets, scrapes int) ([]Group, int64, int64, int) {
	tb.Helper()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	scr, err := workload.Generate(workload.Options{Targets: targets, Scrapes: scrapes, Interval: 15 * time.Second, Seed: 1, Start: start, Histogram: true})
	if err != nil {
		tb.Fatal(err)
	}
	byTarget := map[int]*Group{}
	idx := map[int]map[uint64]int{}
	var order []int
	n := 0
	for _, s := range scr {
		g := byTarget[s.Target]
		if g == nil {
			g = &Group{Key: s.Instance, Tables: []Table{{}}}
			byTarget[s.Target] = g
			idx[s.Target] = map[uint64]int{}
			order = append(order, s.Target)
		}
		tab := &g.Tables[0]
		row := int32(len(tab.Timestamps))
		tab.Timestamps = append(tab.Timestamps, s.T)
		for _, smp := range s.Samples {
			m, ok := idx[s.Target][smp.Ref]
			if !ok {
				m = len(g.Members)
				idx[s.Target][smp.Ref] = m
				g.Members = append(g.Members, smp.Labels)
				tab.Columns = append(tab.Columns, Column{Member: m})
			}
			c := &tab.Columns[m]
			c.Rows = append(c.Rows, row)
			c.Values = append(c.Values, smp.V)
			n++
		}
	}
	gs := make([]Group, 0, len(order))
	for _, t := range order {
		gs = append(gs, *byTarget[t])
	}
	mint := start.UnixMilli()
	return gs, mint, mint + int64(scrapes)*15000 + 1, n
}

func dirSize(tb testing.TB, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// promSample implements chunks.Sample for floats.
type promSample struct {
	t int64
	f float64
}

func (s promSample) T() int64                      { return s.t }
func (s promSample) ST() int64                     { return 0 }
func (s promSample) F() float64                    { return s.f }
func (s promSample) H() *histogram.Histogram       { return nil }
func (s promSample) FH() *histogram.FloatHistogram { return nil }
func (s promSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s promSample) Copy() chunks.Sample           { return s }

// BenchmarkWrite writes 2 h of 10 node_exporter-like targets and reports the block's bytes per sample next to Prometheus's.
func BenchmarkWrite(b *testing.B) {
	gs, mint, maxt, n := nodeGroups(b, 10, 480)
	var size int64
	for b.Loop() {
		dir := b.TempDir()
		meta, err := Write(dir, mint, maxt, Groups(gs), WriteOptions{})
		if err != nil {
			b.Fatal(err)
		}
		size = dirSize(b, filepath.Join(dir, meta.ULID))
	}
	b.ReportMetric(float64(size)/float64(n), "bytes/sample")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")

	// The same samples in a Prometheus block.
	b.ReportMetric(float64(dirSize(b, promBlock(b, gs)))/float64(n), "prom-bytes/sample")
}

// promBlock writes the samples of gs as a Prometheus block in a temporary
// directory and returns the block's directory.
func promBlock(tb testing.TB, gs []Group) string {
	tb.Helper()
	var series []storage.Series
	for _, g := range gs {
		for _, c := range g.Tables[0].Columns {
			ss := make([]chunks.Sample, len(c.Rows))
			for i, r := range c.Rows {
				ss[i] = promSample{g.Tables[0].Timestamps[r], c.Values[i]}
			}
			series = append(series, storage.NewListSeries(g.Members[c.Member], ss))
		}
	}
	bdir, err := tsdb.CreateBlock(series, tb.TempDir(), 24*3600*1000, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	return bdir
}

// BenchmarkIterate reads every sample of every series of a block, tandem's
// next to Prometheus's holding the same samples:
//
//	tandem             the block's raw per-series Iterator, by series id
//	tandem-select      the steps of tandem's block querier (tsdb.blockQuerier, which
//	                   this package cannot import): postings of the matcher, chunk
//	                   stats, labels, then the series' Iterator
//	prometheus-select  tsdb.OpenBlock + tsdb.NewBlockQuerier, Select, iterate each series
//
// Both select rows use the matcher __name__=~".+" (every series) and create
// a querier per op; the blocks are opened once.
func BenchmarkIterate(b *testing.B) {
	gs, mint, maxt, n := nodeGroups(b, 4, 480)
	blk := writeAndOpen(b, gs, mint, maxt)
	defer blk.Close()
	all := labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+")
	report := func(b *testing.B, got int) {
		if got != n {
			b.Fatalf("iterated %d samples, want %d", got, n)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
		b.ReportMetric(float64(n), "samples/op")
	}

	b.Run("tandem", func(b *testing.B) {
		var it chunkenc.Iterator
		got := 0
		b.ReportAllocs()
		for b.Loop() {
			got = 0
			for id := 0; id < blk.NumSeries(); id++ {
				it = blk.Iterator(uint32(id), math.MinInt64, math.MaxInt64, it)
				for it.Next() == chunkenc.ValFloat {
					got++
				}
				if it.Err() != nil {
					b.Fatal(it.Err())
				}
			}
		}
		report(b, got)
	})

	b.Run("tandem-select", func(b *testing.B) {
		var it chunkenc.Iterator
		got := 0
		b.ReportAllocs()
		for b.Loop() {
			got = 0
			ids, err := blk.Postings(all)
			if err != nil {
				b.Fatal(err)
			}
			for _, id := range ids {
				st, err := blk.ChunkStats(id, math.MinInt64, math.MaxInt64)
				if err != nil {
					b.Fatal(err)
				}
				if len(st) == 0 {
					continue
				}
				lset, err := blk.Labels(id)
				if err != nil {
					b.Fatal(err)
				}
				benchLabelsSink += lset.Len()
				it = blk.Iterator(id, math.MinInt64, math.MaxInt64, it)
				for it.Next() == chunkenc.ValFloat {
					got++
				}
				if it.Err() != nil {
					b.Fatal(it.Err())
				}
			}
		}
		report(b, got)
	})

	b.Run("prometheus-select", func(b *testing.B) {
		pblk, err := tsdb.OpenBlock(slog.New(slog.DiscardHandler), promBlock(b, gs), nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer pblk.Close()
		ctx := context.Background()
		var it chunkenc.Iterator
		got := 0
		b.ReportAllocs()
		for b.Loop() {
			got = 0
			q, err := tsdb.NewBlockQuerier(pblk, math.MinInt64, math.MaxInt64)
			if err != nil {
				b.Fatal(err)
			}
			ss := q.Select(ctx, false, nil, all)
			for ss.Next() {
				s := ss.At()
				benchLabelsSink += s.Labels().Len()
				it = s.Iterator(it)
				for it.Next() == chunkenc.ValFloat {
					got++
				}
				if it.Err() != nil {
					b.Fatal(it.Err())
				}
			}
			if ss.Err() != nil {
				b.Fatal(ss.Err())
			}
			q.Close()
		}
		report(b, got)
	})
}

var benchLabelsSink int

// BenchmarkOpen opens blocks of about 100k and 1M samples: the cost must not grow with the chunks.
func BenchmarkOpen(b *testing.B) {
	for _, sc := range []struct {
		name    string
		scrapes int
	}{{"100k", 100}, {"1M", 1000}} {
		b.Run(sc.name, func(b *testing.B) {
			gs, mint, maxt, n := nodeGroups(b, 1, sc.scrapes)
			dir := b.TempDir()
			meta, err := Write(dir, mint, maxt, Groups(gs), WriteOptions{})
			if err != nil {
				b.Fatal(err)
			}
			p := filepath.Join(dir, meta.ULID)
			b.ReportAllocs()
			for b.Loop() {
				blk, err := Open(p)
				if err != nil {
					b.Fatal(err)
				}
				blk.Close()
			}
			b.ReportMetric(float64(n), "samples")
		})
	}
}

// BenchmarkPostings evaluates the point lookups of tsdb's
// BenchmarkSeriesLookup (one target's node_cpu_seconds_total, and that
// without mode="idle") on a block's index alone. LOOKUP_TARGETS sets the
// targets (default 200; 2000 is about 1M series).
func BenchmarkPostings(b *testing.B) {
	gs, blk, _ := lookupBlock(b, 200, 1)
	defer blk.Close()
	b.Logf("%d series", blk.NumSeries())
	target := []*labels.Matcher{
		labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "node_cpu_seconds_total"),
		labels.MustNewMatcher(labels.MatchEqual, "instance", gs[len(gs)/2].Members[0].Get("instance")),
	}
	gs = nil
	runtime.GC() // the samples written are garbage now: no marking of them during the loop
	for _, c := range []struct {
		name string
		ms   []*labels.Matcher
	}{
		{"target", target},
		{"target-mode", append(target[:2:2], labels.MustNewMatcher(labels.MatchNotEqual, "mode", "idle"))},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				ids, err := blk.Postings(c.ms...)
				if err != nil || len(ids) == 0 {
					b.Fatalf("%d ids, %v", len(ids), err)
				}
				n = len(ids)
			}
			b.ReportMetric(float64(n), "series/op")
		})
	}
}

// BenchmarkSeriesNewest reads every series' labels and newest sample from the
// chunk statistics, as an instant query over all series does (20 targets,
// 10k series; LOOKUP_TARGETS sets the targets).
func BenchmarkSeriesNewest(b *testing.B) {
	_, blk, maxt := lookupBlock(b, 20, 480) // the samples written are garbage after this
	defer blk.Close()
	runtime.GC()
	n := blk.NumSeries()
	var sc SeriesScratch
	b.ReportAllocs()
	for b.Loop() {
		for id := 0; id < n; id++ {
			if _, in, err := blk.SeriesNewest(uint32(id), maxt-300_000, maxt, &sc); err != nil || !in {
				b.Fatalf("series %d: in %v, %v", id, in, err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/series")
}

// lookupBlock writes and opens a block of node_exporter-like targets (the
// default count, or LOOKUP_TARGETS) over scrapes scrapes, and returns its
// groups and end time.
func lookupBlock(b *testing.B, targets, scrapes int) ([]Group, *Block, int64) {
	if v, err := strconv.Atoi(os.Getenv("LOOKUP_TARGETS")); err == nil && v > 0 {
		targets = v
	}
	gs, mint, maxt, _ := nodeGroups(b, targets, scrapes)
	return gs, writeAndOpen(b, gs, mint, maxt), maxt
}

// writeAndOpen writes gs as a block over [mint, maxt) and opens it.
func writeAndOpen(b *testing.B, gs []Group, mint, maxt int64) *Block {
	dir := b.TempDir()
	meta, err := Write(dir, mint, maxt, Groups(gs), WriteOptions{})
	if err != nil {
		b.Fatal(err)
	}
	blk, err := Open(filepath.Join(dir, meta.ULID))
	if err != nil {
		b.Fatal(err)
	}
	return blk
}

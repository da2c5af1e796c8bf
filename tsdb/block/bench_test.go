package block

import (
	"context"
	"io/fs"
	"log/slog"
	"math"
	"path/filepath"
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
	pdir := b.TempDir()
	bdir, err := tsdb.CreateBlock(series, pdir, 24*3600*1000, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(dirSize(b, bdir))/float64(n), "prom-bytes/sample")
	_ = context.Background
}

func BenchmarkIterate(b *testing.B) {
	gs, mint, maxt, n := nodeGroups(b, 4, 480)
	dir := b.TempDir()
	meta, err := Write(dir, mint, maxt, Groups(gs), WriteOptions{})
	if err != nil {
		b.Fatal(err)
	}
	blk, err := Open(filepath.Join(dir, meta.ULID))
	if err != nil {
		b.Fatal(err)
	}
	defer blk.Close()
	var it chunkenc.Iterator
	b.ReportAllocs()
	for b.Loop() {
		for id := 0; id < blk.NumSeries(); id++ {
			it = blk.Iterator(uint32(id), math.MinInt64, math.MaxInt64, it)
			for it.Next() == chunkenc.ValFloat {
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
	b.ReportMetric(float64(n), "samples/op")
}

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

var _ = labels.EmptyLabels

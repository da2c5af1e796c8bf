package compact

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/tandem-tsdb/tandem/tsdb/block"
	"github.com/tandem-tsdb/tandem/workload"
)

// nodeBlocks writes nblocks adjacent 2 h blocks of node_exporter-like targets (15 s scrapes, one aligned group per target).
func nodeBlocks(tb testing.TB, targets, nblocks int) ([]*block.Block, int) {
	tb.Helper()
	const perBlock = 480
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	scr, err := workload.Generate(workload.Options{Targets: targets, Scrapes: perBlock * nblocks, Interval: 15 * time.Second,
		Seed: 1, Start: start, Histogram: true})
	if err != nil {
		tb.Fatal(err)
	}
	span := int64(perBlock) * 15000
	mint := start.UnixMilli()
	dir := tb.TempDir()
	var out []*block.Block
	n := 0
	for bi := 0; bi < nblocks; bi++ {
		lo, hi := mint+int64(bi)*span, mint+int64(bi+1)*span
		byTarget := map[int]*block.Group{}
		idx := map[int]map[uint64]int{}
		var order []int
		for _, s := range scr {
			if s.T < lo || s.T >= hi {
				continue
			}
			g := byTarget[s.Target]
			if g == nil {
				g = &block.Group{Key: s.Instance, Tables: []block.Table{{}}}
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
					tab.Columns = append(tab.Columns, block.Column{Member: m})
				}
				c := &tab.Columns[m]
				c.Rows = append(c.Rows, row)
				c.Values = append(c.Values, smp.V)
				n++
			}
		}
		gs := make([]block.Group, 0, len(order))
		for _, t := range order {
			gs = append(gs, *byTarget[t])
		}
		meta, err := block.Write(dir, lo, hi, block.Groups(gs), block.WriteOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		b, err := block.Open(filepath.Join(dir, meta.ULID))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { b.Close() })
		out = append(out, b)
	}
	return out, n
}

// BenchmarkMerge merges three 2 h blocks of 10 node_exporter-like targets (6 h, about 7.5 M samples)
// and reports samples/s and the bytes per sample of the sources and of the merged block.
func BenchmarkMerge(b *testing.B) {
	srcs, n := nodeBlocks(b, 10, 3)
	var srcBytes int64
	for _, s := range srcs {
		srcBytes += dirSize(b, s.Dir())
	}
	var size int64
	b.ReportAllocs()
	for b.Loop() {
		dir := b.TempDir()
		meta, err := Merge(dir, srcs, block.WriteOptions{})
		if err != nil {
			b.Fatal(err)
		}
		size = dirSize(b, filepath.Join(dir, meta.ULID))
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric(float64(srcBytes)/float64(n), "src-bytes/sample")
	b.ReportMetric(float64(size)/float64(n), "bytes/sample")
}

// TestMergeNodeBlocks checks the benchmark's data: merging realistic blocks keeps every sample and does not cost more bytes per sample.
func TestMergeNodeBlocks(t *testing.T) {
	srcs, n := nodeBlocks(t, 2, 3)
	mb := mergeBlocks(t, srcs)
	if mb.Meta().Stats.NumSamples != uint64(n) {
		t.Fatalf("merged %d samples, want %d", mb.Meta().Stats.NumSamples, n)
	}
	var srcBytes int64
	for _, s := range srcs {
		srcBytes += dirSize(t, s.Dir())
	}
	mergedBytes := dirSize(t, mb.Dir())
	t.Logf("%d samples: sources %.3f bytes/sample, merged %.3f", n, float64(srcBytes)/float64(n), float64(mergedBytes)/float64(n))
	if mergedBytes > srcBytes {
		t.Fatalf("merged block %d bytes, sources %d", mergedBytes, srcBytes)
	}
}

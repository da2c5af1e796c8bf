package compact

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tandem-tsdb/tandem/internal/memtest"
	"github.com/tandem-tsdb/tandem/tsdb/block"
	"github.com/tandem-tsdb/tandem/workload"
)

// wideBlocks writes nblocks adjacent blocks of rows scrapes each (15 s apart) of one target with
// members node_exporter-like series (the workload's templates, repeated with a "replica" label),
// one aligned group, and returns them opened with their sample count.
func wideBlocks(tb testing.TB, dir string, members, nblocks, rows int) ([]*block.Block, int) {
	tb.Helper()
	d, err := workload.FindDataDir()
	if err != nil {
		tb.Fatal(err)
	}
	base, err := workload.LoadTemplates(d)
	if err != nil {
		tb.Fatal(err)
	}
	tms := make([]workload.Template, 0, members)
	for r := 0; len(tms) < members; r++ {
		for _, tm := range base {
			if len(tms) == members {
				break
			}
			b := labels.NewBuilder(tm.Labels)
			b.Set("replica", fmt.Sprint(r))
			tm.Labels = b.Labels()
			tms = append(tms, tm)
		}
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	gen, err := workload.NewGenerator(workload.Options{Targets: 1, Scrapes: nblocks * rows, Interval: 15 * time.Second,
		Seed: 1, Start: start, Templates: tms})
	if err != nil {
		tb.Fatal(err)
	}
	span := int64(rows) * 15000
	g := block.Group{Key: "host-0:9100", Members: make([]labels.Labels, members), Tables: []block.Table{{
		Timestamps: make([]int64, 0, rows), Columns: make([]block.Column, members)}}}
	tab := &g.Tables[0]
	for m := range tab.Columns {
		tab.Columns[m] = block.Column{Member: m, Rows: make([]int32, 0, rows), Values: make([]float64, 0, rows)}
	}
	var out []*block.Block
	n := 0
	for bi := 0; bi < nblocks; bi++ {
		tab.Timestamps = tab.Timestamps[:0]
		for m := range tab.Columns {
			tab.Columns[m].Rows, tab.Columns[m].Values = tab.Columns[m].Rows[:0], tab.Columns[m].Values[:0]
		}
		for r := 0; r < rows; r++ {
			sc := gen.Next()[0]
			tab.Timestamps = append(tab.Timestamps, sc.T)
			for m, s := range sc.Samples {
				g.Members[m] = s.Labels
				c := &tab.Columns[m]
				c.Rows = append(c.Rows, int32(r))
				c.Values = append(c.Values, s.V)
			}
			n += len(sc.Samples)
		}
		lo := start.UnixMilli() + int64(bi)*span
		meta, err := block.Write(dir, lo, lo+span, block.Groups([]block.Group{g}), block.WriteOptions{})
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

// mergePeak merges srcs into dir and returns the peak heap it took.
func mergePeak(tb testing.TB, dir string, srcs []*block.Block) uint64 {
	tb.Helper()
	var err error
	peak := memtest.PeakHeap(func() { _, err = Merge(dir, srcs, block.WriteOptions{}) })
	if err != nil {
		tb.Fatal(err)
	}
	return peak
}

// BenchmarkMergeMemory merges 27 adjacent 2 h blocks (15 s scrapes) of one 10,000-member group
// (130 M samples; the blocks are written once, before timing) and reports the peak heap of a merge.
func BenchmarkMergeMemory(b *testing.B) {
	srcs, n := wideBlocks(b, b.TempDir(), 10000, 27, 480)
	var peak uint64
	for b.Loop() {
		peak = max(peak, mergePeak(b, b.TempDir(), srcs))
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(peak)/float64(n), "peak-heap-bytes/sample")
	b.ReportMetric(float64(n), "samples")
}

// TestMergeMemoryBounded merges 27 adjacent blocks of one 1,000-member group (30 min each): the peak heap of the
// merge stays a small fraction of the samples' decoded size (12 bytes each) — bounded by the
// group's members times one chunk, not by the group's samples.
func TestMergeMemoryBounded(t *testing.T) {
	srcs, n := wideBlocks(t, t.TempDir(), 1000, 27, 120)
	peak := mergePeak(t, t.TempDir(), srcs)
	t.Logf("%d samples: peak heap %.1f MiB, %.2f bytes/sample", n, float64(peak)/(1<<20), float64(peak)/float64(n))
	const bound = 32 << 20
	if peak > bound {
		t.Fatalf("merge of %d samples took a peak heap of %.1f MiB (%.2f bytes/sample), want under %d MiB",
			n, float64(peak)/(1<<20), float64(peak)/float64(n), bound>>20)
	}
}

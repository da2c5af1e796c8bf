package tsdb

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/compact"
	"github.com/tandem-tsdb/tandem/internal/memtest"
	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// wideValue is the value of member m's sample in row r of wideBlocks: counters and one-decimal gauges.
func wideValue(m, r int) float64 {
	if m%3 == 0 {
		return float64((m%50 + 1) * r)
	}
	return float64((m*7+r*13)%1000) / 10
}

// wideMember is the labels of member m of wideBlocks' group.
func wideMember(m int) labels.Labels {
	return labels.FromStrings("__name__", fmt.Sprintf("node_metric_%d", m%40), "instance", "host-0:9100", "job", "node", "member", fmt.Sprint(m))
}

// wideBlocks writes into dir nblocks adjacent blocks of one group of members series, each of rows
// scrapes 15 s apart, the first at mint; the rows count on across blocks (wideValue).
func wideBlocks(t testing.TB, dir string, members, nblocks, rows int, mint int64) {
	t.Helper()
	g := block.Group{Key: "host-0:9100", Members: make([]labels.Labels, members), Tables: []block.Table{{
		Timestamps: make([]int64, rows), Columns: make([]block.Column, members)}}}
	tab := &g.Tables[0]
	for m := range members {
		g.Members[m] = wideMember(m)
		tab.Columns[m] = block.Column{Member: m, Rows: make([]int32, rows), Values: make([]float64, rows)}
	}
	for bi := range nblocks {
		r0 := bi * rows
		for r := range rows {
			tab.Timestamps[r] = mint + int64(r0+r)*15000
		}
		for m := range members {
			c := &tab.Columns[m]
			for r := range rows {
				c.Rows[r], c.Values[r] = int32(r), wideValue(m, r0+r)
			}
		}
		lo := mint + int64(r0)*15000
		if _, err := block.Write(dir, lo, lo+int64(rows)*15000, block.Groups([]block.Group{g}), block.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// cleanPeak deletes [del0, del1] of the members matching "1.*" and everything of those matching
// "2.*" from db, cleans the tombstones and returns the peak heap of the cleaning.
func cleanPeak(t testing.TB, db *DB, del0, del1 int64) uint64 {
	t.Helper()
	if err := db.Delete(context.Background(), del0, del1, labels.MustNewMatcher(labels.MatchRegexp, "member", "1.*")); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(context.Background(), math.MinInt64, math.MaxInt64, labels.MustNewMatcher(labels.MatchRegexp, "member", "2.*")); err != nil {
		t.Fatal(err)
	}
	var err error
	peak := memtest.PeakHeap(func() { err = db.CleanTombstones() })
	if err != nil {
		t.Fatal(err)
	}
	return peak
}

// BenchmarkCleanTombstonesMemory cleans tombstones out of one block of 27 x 2 h (15 s scrapes) of
// one 10,000-member group (130 M samples, merged from 27 blocks before timing) and reports the
// peak heap of the cleaning.
func BenchmarkCleanTombstonesMemory(b *testing.B) {
	const members, nblocks, rows = 10000, 27, 480
	mint := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	parts := b.TempDir()
	wideBlocks(b, parts, members, nblocks, rows, mint)
	var srcs []*block.Block
	ents, err := os.ReadDir(parts)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		bl, err := block.Open(filepath.Join(parts, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		defer bl.Close()
		srcs = append(srcs, bl)
	}
	dir := b.TempDir()
	if _, err := compact.Merge(dir, srcs, block.WriteOptions{}); err != nil {
		b.Fatal(err)
	}
	var peak uint64
	for b.Loop() {
		db := openDB(b, dir, func(o *DBOptions) { o.Head.BlockRange = 2 * time.Hour })
		peak = max(peak, cleanPeak(b, db, mint+3600000, mint+3*3600000))
		db.Close()
	}
	n := members * nblocks * rows
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(peak)/float64(n), "peak-heap-bytes/sample")
	b.ReportMetric(float64(n), "samples")
}

// TestCleanTombstonesMemoryBounded cleans tombstones out of one 9 h block of a 1,000-member group
// (2.16 M samples): the peak heap of the rewrite stays a small fraction of the samples' decoded
// size (12 bytes each), bounded by the group's members times one chunk, not by the group's
// samples; the deleted samples are gone, series left without samples too, and the other samples
// are there.
func TestCleanTombstonesMemoryBounded(t *testing.T) {
	const members, rows, hour = 1000, 18 * 120, int64(3600000)
	dir := t.TempDir()
	mint := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	wideBlocks(t, dir, members, 1, rows, mint)
	db := openDB(t, dir, func(o *DBOptions) { o.Head.BlockRange = 2 * time.Hour })
	defer db.Close()
	// Members 1, 10-19 and 100-199 lose [1 h, 3 h]; members 2, 20-29 and 200-299 lose everything.
	del0, del1 := mint+hour, mint+3*hour
	peak := cleanPeak(t, db, del0, del1)
	n := members * rows
	t.Logf("%d samples: peak heap %.1f MiB, %.2f bytes/sample", n, float64(peak)/(1<<20), float64(peak)/float64(n))
	const bound = 16 << 20
	if peak > bound {
		t.Fatalf("cleaning tombstones out of a block of %d samples took a peak heap of %.1f MiB (%.2f bytes/sample), want under %d MiB",
			n, float64(peak)/(1<<20), float64(peak)/float64(n), bound>>20)
	}

	bs := db.Blocks()
	if len(bs) != 1 {
		t.Fatalf("%d blocks after cleaning, want 1", len(bs))
	}
	deadRows := int((del1-del0)/15000) + 1
	if got, want := bs[0].Stats.NumSamples, uint64(n-111*deadRows-111*rows); got != want {
		t.Fatalf("rewritten block holds %d samples, want %d", got, want)
	}
	if got := bs[0].Stats.NumSeries; got != members-111 {
		t.Fatalf("rewritten block holds %d series, want %d (those whose samples are all deleted go)", got, members-111)
	}
	q, err := db.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchRegexp, "member", ".+")); ss.Next(); {
		series++
	}
	q.Close()
	if series != members-111 {
		t.Fatalf("%d series read, want %d", series, members-111)
	}
	q, err = db.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	got := readQuerier(t, q, labels.MustNewMatcher(labels.MatchRegexp, "member", "0|1|2|3|15|150|999"))
	if len(got) != 6 {
		t.Fatalf("%d of members 0, 1, 2, 3, 15, 150 and 999 read, want all but 2", len(got))
	}
	for _, m := range []int{0, 1, 3, 15, 150, 999} {
		ss := got[wideMember(m).String()]
		want := 0
		for r := range rows {
			ts := mint + int64(r)*15000
			if fmt.Sprint(m)[0] == '1' && ts >= del0 && ts <= del1 {
				if _, ok := ss[ts]; ok {
					t.Fatalf("member %d: deleted sample at %d read back", m, ts)
				}
				continue
			}
			want++
			if v, ok := ss[ts]; !ok || v != math.Float64bits(wideValue(m, r)) {
				t.Fatalf("member %d at %d: %#x (%v), want %#x", m, ts, v, ok, math.Float64bits(wideValue(m, r)))
			}
		}
		if len(ss) != want {
			t.Fatalf("member %d: %d samples, want %d", m, len(ss), want)
		}
	}
}

package head

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// TestSeriesTable adds, finds and removes series in turn against a map of
// what the table should hold, through growth, tombstones and shrinking.
func TestSeriesTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tb seriesTable
	want := map[string]*memSeries{}
	var all []*memSeries
	for i := range 20000 {
		all = append(all, &memSeries{lset: labels.FromStrings("__name__", "m", "i", fmt.Sprint(i))})
	}
	check := func(round int) {
		t.Helper()
		for _, s := range all {
			got := tb.get(s.lset.Hash(), s.lset)
			if w := want[s.lset.String()]; got != w {
				t.Fatalf("round %d: %s: got %p, want %p", round, s.lset, got, w)
			}
		}
		if tb.used != len(want) {
			t.Fatalf("round %d: %d used, want %d", round, tb.used, len(want))
		}
		if (tb.used+tb.dead)*8 > len(tb.slots)*7 {
			t.Fatalf("round %d: %d used and %d dead in %d slots", round, tb.used, tb.dead, len(tb.slots))
		}
	}
	for round := range 6 {
		for range 15000 {
			s := all[rng.IntN(len(all))]
			h := s.lset.Hash()
			if want[s.lset.String()] == nil && round%3 != 2 {
				tb.add(h, s)
				want[s.lset.String()] = s
			} else if round%3 != 0 {
				tb.remove(h, s)
				delete(want, s.lset.String())
			}
		}
		check(round)
	}
	// Everything removed: the next rebuild shrinks the table.
	for _, s := range all {
		tb.remove(s.lset.Hash(), s)
	}
	clear(want)
	check(6)
	big := len(tb.slots)
	for i := range 4 * big { // new series: tombstones pile up until a rebuild drops them
		s := &memSeries{lset: labels.FromStrings("__name__", "n", "i", fmt.Sprint(i))}
		tb.add(s.lset.Hash(), s)
		tb.remove(s.lset.Hash(), s)
	}
	if len(tb.slots) >= big || tb.get(all[0].lset.Hash(), all[0].lset) != nil {
		t.Fatalf("%d slots after emptying %d", len(tb.slots), big)
	}
	// find stops at the first series match accepts, among equal tags.
	s := all[1]
	tb.add(s.lset.Hash(), s)
	if tb.find(s.lset.Hash(), func(*memSeries) bool { return false }) != nil || tb.find(s.lset.Hash(), func(c *memSeries) bool { return c == s }) != s {
		t.Fatal("find does not follow match")
	}
}

// BenchmarkSeriesTable measures a lookup of a known series among 1M/256
// (one stripe's share of a million series).
func BenchmarkSeriesTable(b *testing.B) {
	var tb seriesTable
	var all []*memSeries
	var hashes []uint64
	for i := range 4096 {
		s := &memSeries{lset: labels.FromStrings("__name__", "node_cpu_seconds_total", "cpu", fmt.Sprint(i%64), "instance", fmt.Sprintf("host-%d:9100", i/64), "job", "node", "mode", "idle")}
		all, hashes = append(all, s), append(hashes, s.lset.Hash())
		tb.add(hashes[i], s)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i & 4095
		if tb.get(hashes[j], all[j].lset) != all[j] {
			b.Fatal("not found")
		}
	}
}

// BenchmarkSeriesTableAdd fills an empty table with 65,536 series, growing
// it as a stripe's table grows while a head's series are created.
func BenchmarkSeriesTableAdd(b *testing.B) {
	const n = 1 << 16
	all := make([]*memSeries, n)
	hashes := make([]uint64, n)
	for i := range all {
		all[i] = &memSeries{lset: labels.FromStrings("__name__", "node_cpu_seconds_total", "cpu", fmt.Sprint(i%64), "instance", fmt.Sprintf("host-%d:9100", i/64), "job", "node", "mode", "idle")}
		hashes[i] = all[i].lset.Hash()
	}
	b.ReportAllocs()
	for b.Loop() {
		var tb seriesTable
		for i, s := range all {
			tb.add(hashes[i], s)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/series")
}

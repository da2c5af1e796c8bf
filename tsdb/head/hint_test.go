package head

import (
	"math/rand"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
)

// bucketsGrowIter is bucketsGrow over Prometheus's bucket iterators: the
// reference the span walk must agree with.
func bucketsGrowIter[BC histogram.BucketCount](prev, cur histogram.BucketIterator[BC]) bool {
	have := cur.Next()
	for prev.Next() {
		p := prev.At()
		if p.Count == 0 {
			continue
		}
		for have && cur.At().Index < p.Index {
			have = cur.Next()
		}
		if !have || cur.At().Index != p.Index || cur.At().Count < p.Count {
			return false
		}
	}
	return true
}

// randomLayout returns spans and absolute counts of a random bucket layout.
func randomLayout(rng *rand.Rand) ([]histogram.Span, []int64) {
	var spans []histogram.Span
	var counts []int64
	for range rng.Intn(4) {
		off := int32(rng.Intn(4))
		if len(spans) == 0 {
			off -= 2
		}
		n := uint32(rng.Intn(4))
		spans = append(spans, histogram.Span{Offset: off, Length: n})
		for range n {
			counts = append(counts, int64(rng.Intn(4)))
		}
	}
	return spans, counts
}

func deltasOf(counts []int64) []int64 {
	out := make([]int64, len(counts))
	prev := int64(0)
	for i, c := range counts {
		out[i], prev = c-prev, c
	}
	return out
}

func floatsOf(counts []int64) []float64 {
	out := make([]float64, len(counts))
	for i, c := range counts {
		out[i] = float64(c)
	}
	return out
}

// TestBucketsGrowMatchesIterators compares the span walk with Prometheus's
// bucket iterators on random layouts, same and different, integer and float.
func TestBucketsGrowMatchesIterators(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	grew, shrank := 0, 0
	for i := 0; i < 20000; i++ {
		ps, pc := randomLayout(rng)
		cs, cc := randomLayout(rng)
		if rng.Intn(2) == 0 { // the same layout, counts grown or not
			cs, cc = ps, make([]int64, len(pc))
			for k := range pc {
				cc[k] = pc[k] + int64(rng.Intn(3)) - int64(rng.Intn(2))
				cc[k] = max(cc[k], 0)
			}
		}
		ph := &histogram.Histogram{PositiveSpans: ps, PositiveBuckets: deltasOf(pc)}
		ch := &histogram.Histogram{PositiveSpans: cs, PositiveBuckets: deltasOf(cc)}
		want := bucketsGrowIter(ph.PositiveBucketIterator(), ch.PositiveBucketIterator())
		if got := bucketsGrow(ps, ph.PositiveBuckets, cs, ch.PositiveBuckets, true); got != want {
			t.Fatalf("integer: %v %v → %v %v: %v, want %v", ps, pc, cs, cc, got, want)
		}
		pf := &histogram.FloatHistogram{PositiveSpans: ps, PositiveBuckets: floatsOf(pc)}
		cf := &histogram.FloatHistogram{PositiveSpans: cs, PositiveBuckets: floatsOf(cc)}
		if got := bucketsGrow(ps, pf.PositiveBuckets, cs, cf.PositiveBuckets, false); got != want {
			t.Fatalf("float: %v %v → %v %v: %v, want %v", ps, pc, cs, cc, got, want)
		}
		if want {
			grew++
		} else {
			shrank++
		}
	}
	if grew < 1000 || shrank < 1000 {
		t.Fatalf("cases: %d grew, %d did not: the generator misses one side", grew, shrank)
	}
}

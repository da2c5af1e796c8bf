package head

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/fastread"
)

// TestLastSampleAfterTruncate: once a series' newest sample is flushed and
// truncated away, the newest-sample hint finds nothing of it in the head (a
// query then reads it from its block alone, not merged with a copy); a
// staleness marker the head infers after the truncation is read with and
// without the hint.
func TestLastSampleAfterTruncate(t *testing.T) {
	h := openHead(t, t.TempDir(), func(o *Options) { o.InferStalenessRows = 3 })
	defer h.Close()
	const step, cut = 15000, 3600000
	gone := series("lt", "job", "j", "instance", "other", "m", "gone") // its target stops before the cut
	late := series("lt", "job", "j", "instance", "i", "m", "late")     // stops at the cut, its group goes on
	for s := 0; s < cut/step+40; s++ {
		ts := int64(s) * step
		var b Batch
		for m := range 4 {
			b.Series = append(b.Series, BatchSeries{Labels: series("lt", "job", "j", "instance", "i", "m", fmt.Sprint("on", m)), Samples: []Sample{{T: ts, V: 1}}})
		}
		if ts < cut {
			b.Series = append(b.Series, BatchSeries{Labels: gone, Samples: []Sample{{T: ts, V: 2}}})
		}
		if ts < cut {
			b.Series = append(b.Series, BatchSeries{Labels: late, Samples: []Sample{{T: ts, V: 3}}})
		}
		if ts == cut {
			h.truncate(cut) // both stopped series' samples are all in a block now's samples are all in a block now
		}
		if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	end := int64(cut + 10*step)
	newest := func(fn string) map[string][2]float64 {
		q, err := h.Querier(end-300000, end)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		ss := q.Select(context.Background(), false, &storage.SelectHints{Start: end - 300000, End: end, Func: fn},
			labels.MustNewMatcher(labels.MatchEqual, "__name__", "lt"))
		out := map[string][2]float64{}
		for ss.Next() {
			it := ss.At().Iterator(nil)
			for it.Next() == chunkenc.ValFloat {
				ts, v := it.At()
				out[ss.At().Labels().Get("m")] = [2]float64{float64(ts), v}
			}
		}
		if err := ss.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := newest("")
	got := newest(fastread.HintLastSample)
	if _, ok := got["gone"]; ok {
		t.Errorf("series truncated away returned by the head with the hint: %v", got["gone"])
	}
	m, ok := want["late"]
	if !ok || !value.IsStaleNaN(m[1]) || int64(m[0]) != cut+2*step {
		t.Fatalf("inferred marker after the truncation: newest %v (ok %v), want a marker at %d", m, ok, cut+2*step)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("newest samples with the hint %v, without %v", got, want)
	}
	if v := got["on0"]; v[0] != float64(end) || v[1] != 1 {
		t.Errorf("present series: newest %v", v)
	}
}

package tsdb

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/fastread"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// TestHintLastSample: with the push-down's hint, the head's snapshot of a
// series holds its newest sample at or before the end of the range when that
// is its newest one, and everything otherwise; the newest sample read through
// it is always the one a full read finds.
func TestHintLastSample(t *testing.T) {
	h := newTestDB(t)
	app := h.Appender(context.Background())
	stale := math.Float64frombits(value.StaleNaN)
	for ts := int64(0); ts <= 600_000; ts += 15_000 {
		for i, name := range []string{"a", "b", "c"} {
			v := float64(ts/1000 + int64(i))
			if name == "c" && ts == 600_000 {
				v = stale // the newest sample is a stale marker
			}
			if name == "b" && ts > 300_000 {
				continue // stopped half way
			}
			if _, err := app.Append(0, labels.FromStrings("__name__", "m", "s", name, "job", "j"), ts, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	newest := func(hints *storage.SelectHints) map[string][2]float64 {
		q, err := h.Querier(math.MinInt64, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		out := map[string][2]float64{}
		ss := q.Select(context.Background(), false, hints, labels.MustNewMatcher(labels.MatchEqual, "__name__", "m"))
		for ss.Next() {
			it := ss.At().Iterator(nil)
			var lt int64 = -1
			var lv float64
			n := 0
			for it.Next() == chunkenc.ValFloat {
				lt, lv = it.At()
				n++
			}
			if hints.Func == fastread.HintLastSample && n > 1 && hints.End >= 600_000 {
				t.Errorf("%s: %d samples read with the hint, want only the newest", ss.At().Labels(), n)
			}
			out[ss.At().Labels().Get("s")] = [2]float64{float64(lt), lv}
		}
		if err := ss.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, end := range []int64{600_000, 610_000, 450_000, 300_000, 10_000} {
		for _, start := range []int64{end - 300_000, end - 60_000} {
			want := newest(&storage.SelectHints{Start: start, End: end})
			got := newest(&storage.SelectHints{Start: start, End: end, Func: fastread.HintLastSample})
			if len(got) != len(want) {
				t.Fatalf("[%d, %d]: %d series with the hint, %d without", start, end, len(got), len(want))
			}
			for k, w := range want {
				g := got[k]
				if g[0] != w[0] || math.Float64bits(g[1]) != math.Float64bits(w[1]) {
					t.Errorf("[%d, %d] series %s: newest %v with the hint, %v without", start, end, k, g, w)
				}
			}
		}
	}
}

// TestHintLastSampleTombstones: when the newest samples of a series are
// deleted, the hint still finds the newest sample that is not.
func TestHintLastSampleTombstones(t *testing.T) {
	db := openDB(t, t.TempDir(), nil)
	defer db.Close()
	var b head.Batch
	l := series("m", "job", "j")
	for ts := int64(0); ts <= 600_000; ts += 15_000 {
		b.Series = append(b.Series, head.BatchSeries{Labels: l, Samples: []head.Sample{{T: ts, V: float64(ts)}}})
	}
	if _, err := db.AppendBatch(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(context.Background(), 570_000, 600_000, labels.MustNewMatcher(labels.MatchEqual, "__name__", "m")); err != nil {
		t.Fatal(err)
	}
	q, err := db.Querier(300_000, 600_000)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ss := q.Select(context.Background(), false, &storage.SelectHints{Start: 300_000, End: 600_000, Func: fastread.HintLastSample}, labels.MustNewMatcher(labels.MatchEqual, "__name__", "m"))
	var last int64 = -1
	for ss.Next() {
		it := ss.At().Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			last, _ = it.At()
		}
	}
	if last != 555_000 {
		t.Errorf("newest sample not deleted: %d, want 555000", last)
	}
}

// TestHintSeries: the HTTP API's series hint selects the same series as a
// full read, over ranges around series that stopped, end in a stale marker or
// lost their newest samples to a deletion.
func TestHintSeries(t *testing.T) {
	db := openDB(t, t.TempDir(), nil)
	defer db.Close()
	var b head.Batch
	stale := math.Float64frombits(value.StaleNaN)
	for ts := int64(0); ts <= 600_000; ts += 15_000 {
		for _, name := range []string{"a", "b", "c", "d"} {
			v := float64(ts)
			switch {
			case name == "b" && ts > 300_000:
				continue // stopped half way
			case name == "c" && ts == 600_000:
				v = stale
			}
			b.Series = append(b.Series, head.BatchSeries{Labels: series("m", "s", name, "job", "j"), Samples: []head.Sample{{T: ts, V: v}}})
		}
	}
	if _, err := db.AppendBatch(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(context.Background(), 400_000, 600_000, labels.MustNewMatcher(labels.MatchEqual, "s", "d")); err != nil {
		t.Fatal(err)
	}
	names := func(start, end int64, fn string) []string {
		q, err := db.Querier(start, end)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		ss := q.Select(context.Background(), true, &storage.SelectHints{Start: start, End: end, Func: fn}, labels.MustNewMatcher(labels.MatchEqual, "__name__", "m"))
		var out []string
		for ss.Next() {
			out = append(out, ss.At().Labels().Get("s"))
		}
		if err := ss.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, r := range [][2]int64{{0, 600_000}, {350_000, 600_000}, {590_000, 700_000}, {0, 100_000}, {301_000, 399_000}, {610_000, 700_000}} {
		want, got := names(r[0], r[1], ""), names(r[0], r[1], fastread.HintSeries)
		if !slices.Equal(got, want) {
			t.Errorf("[%d, %d]: series %v with the series hint, %v without", r[0], r[1], got, want)
		}
	}
}

package head

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/fastread"
)

// readSeries returns the labels and samples of s in [mint, maxt], through
// AppendFloats and through the iterator (which must agree).
func readStreamed(t *testing.T, s storage.Series, mint, maxt int64) string {
	t.Helper()
	ts, vs, err := s.(fastread.FloatAppender).AppendFloats(nil, nil, mint, maxt)
	if err != nil {
		t.Error(err)
	}
	got := fmt.Sprint(s.Labels(), ts, vs)
	var its []int64
	var ivs []float64
	it := s.Iterator(nil)
	for vt := it.Seek(mint); vt == chunkenc.ValFloat; vt = it.Next() {
		t, v := it.At()
		if t > maxt {
			break
		}
		its, ivs = append(its, t), append(ivs, v)
	}
	if it.Err() != nil {
		t.Error(it.Err())
	}
	if viaIt := fmt.Sprint(s.Labels(), its, ivs); viaIt != got {
		t.Errorf("AppendFloats read %s, the iterator %s", got, viaIt)
	}
	return got
}

// TestSelectStream checks that SelectStream yields what Select does, series
// by series, when each series is read before the next: groups of different
// sizes, members with gaps, stale markers and samples off the group's
// timestamps, full ranges and newest samples only.
func TestSelectStream(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	sizes := []int{1, 7, 120, 2, 40, 130, 60} // cut in 3 parts at 128 and 300
	for ts := int64(1000); ts <= 20000; ts += 1000 {
		var b Batch
		for g, n := range sizes {
			for m := range n {
				if (m+int(ts/1000))%5 == 0 && m > 0 {
					continue // a gap
				}
				v := float64(ts*int64(m+1)) / 3
				if m == 3 && ts == 9000 {
					v = math.Float64frombits(value.StaleNaN)
				}
				at := ts
				if m == 1 {
					at += 7 // off the group's timestamps
				}
				b.Series = append(b.Series, BatchSeries{
					Labels:  labels.FromStrings("__name__", "m", "instance", fmt.Sprint("host-", g), "m", fmt.Sprint(m)),
					Samples: []Sample{{T: at, V: v}}})
			}
		}
		if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	ctx := context.Background()
	sel := labels.MustNewMatcher(labels.MatchEqual, "__name__", "m")
	for _, tc := range []struct {
		mint, maxt int64
		fn         string
	}{
		{0, 30000, ""},
		{4500, 12000, ""},
		{15000, 20007, fastread.HintLastSample},
		{0, 8500, fastread.HintLastSample}, // the newest sample is after the range
		{19500, 30000, fastread.HintLastSample},
		{30000, 40000, ""}, // nothing
	} {
		q, err := h.Querier(tc.mint, tc.maxt)
		if err != nil {
			t.Fatal(err)
		}
		hints := &storage.SelectHints{Start: tc.mint, End: tc.maxt, Func: tc.fn}
		var want []string
		ss := q.Select(ctx, false, hints, sel)
		for ss.Next() {
			want = append(want, readStreamed(t, ss.At(), tc.mint, tc.maxt))
		}
		if ss.Err() != nil {
			t.Fatal(ss.Err())
		}
		if tc.mint < 30000 && len(want) == 0 {
			t.Fatalf("%+v: nothing selected", tc)
		}
		for _, parts := range []int{1, 3} {
			sets := q.(fastread.Streamer).SelectStream(ctx, parts, hints, sel)
			if len(sets) != parts {
				t.Fatalf("%+v: %d sets, want %d", tc, len(sets), parts)
			}
			// The sets are read concurrently, each series read as it comes.
			got := make([][]string, len(sets))
			errs := make(chan error, len(sets))
			for i, st := range sets {
				go func() {
					for st.Next() {
						got[i] = append(got[i], readStreamed(t, st.At(), tc.mint, tc.maxt))
					}
					if st.Next() {
						t.Error("Next is true after the end")
					}
					errs <- st.Err()
				}()
			}
			for range sets {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			all := slices.Concat(got...)
			if len(all) != len(want) {
				t.Fatalf("%+v, %d parts: %d series streamed, %d selected", tc, parts, len(all), len(want))
			}
			for i := range all {
				if all[i] != want[i] {
					t.Fatalf("%+v, %d parts: series %d streamed as\n%s\nselected as\n%s", tc, parts, i, all[i], want[i])
				}
			}
		}
	}
}

// TestSelectStreamReusesMemory checks that a stream's memory is that of
// its largest group, not of the selection: it allocates a small part of
// what Select does for the same series.
func TestSelectStreamReusesMemory(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	const groups, members = 40, 100
	for ts := int64(1000); ts <= 10000; ts += 1000 {
		var b Batch
		for g := range groups {
			for m := range members {
				b.Series = append(b.Series, BatchSeries{
					Labels:  labels.FromStrings("__name__", "m", "instance", fmt.Sprint("host-", g), "m", fmt.Sprint(m)),
					Samples: []Sample{{T: ts, V: float64(ts * int64(m))}}})
			}
		}
		if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	q, _ := h.Querier(0, 20000)
	sel := labels.MustNewMatcher(labels.MatchEqual, "__name__", "m")
	for _, fn := range []string{"", fastread.HintLastSample} {
		hints := &storage.SelectHints{Start: 0, End: 20000, Func: fn}
		read := func(ss storage.SeriesSet) int {
			n := 0
			ts, vs := make([]int64, 0, 64), make([]float64, 0, 64)
			for ss.Next() {
				ts, vs, _ = ss.At().(fastread.FloatAppender).AppendFloats(ts[:0], vs[:0], 0, 20000)
				n += len(vs)
			}
			return n
		}
		// The fewest bytes of five runs: the counts are the process's, so a
		// run may also count the head's background work, or a collection
		// that emptied the pools just before it.
		allocated := func(f func() int) (uint64, int) {
			least, n := uint64(math.MaxUint64), 0
			for range 5 {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				n = f()
				runtime.ReadMemStats(&after)
				least = min(least, after.TotalAlloc-before.TotalAlloc)
			}
			return least, n
		}
		ctx := context.Background()
		read(q.(fastread.Streamer).SelectStream(ctx, 1, hints, sel)[0]) // pools warmed
		selected, n1 := allocated(func() int { return read(q.Select(ctx, false, hints, sel)) })
		streamed, n2 := allocated(func() int { return read(q.(fastread.Streamer).SelectStream(ctx, 1, hints, sel)[0]) })
		if n1 != n2 || n1 == 0 {
			t.Fatalf("func %q: %d samples streamed, %d selected", fn, n2, n1)
		}
		t.Logf("func %q: streamed %d bytes, selected %d", fn, streamed, selected)
		if streamed*8 > selected {
			t.Fatalf("func %q: the stream allocated %d bytes, Select %d: its memory is not reused group to group", fn, streamed, selected)
		}
	}
}

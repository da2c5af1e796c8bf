package head

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/tsdb/fastread"
)

// TestHeadBuildingChunkCopies: a query's copies of the chunk being built
// (from the snapshot's slab, with the timestamps shared, when several
// members of a group are selected; on their own otherwise) read back every
// sample exactly, through the iterator and through AppendFloats, for
// members whose values there are constant, varying, with gaps, or absent.
func TestHeadBuildingChunkCopies(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	const members, scrapes = 12, 130 // a frozen chunk of 120 rows, 10 rows being built
	lsets := make([]labels.Labels, members)
	for i := range lsets {
		lsets[i] = series("m", "job", "node", "instance", "a:9100", "idx", fmt.Sprintf("%02d", i))
	}
	want := model{}
	for s := 0; s < scrapes; s++ {
		ts := int64(s) * 15000
		var b Batch
		for i, l := range lsets {
			var v float64
			switch i % 4 {
			case 0:
				v = 42 // constant
			case 1:
				v = float64(s*i) + 0.25*float64(s%3) // varying
			case 2:
				if s%3 == 1 {
					continue // gaps
				}
				v = float64(s) * 1.5
			case 3:
				if s >= 118 {
					continue // absent from the chunk being built
				}
				v = math.Sqrt(float64(s + i))
			}
			b.Series = append(b.Series, BatchSeries{Labels: l, Samples: []Sample{{T: ts, V: v}}})
			want.Add(l, ts, v)
		}
		if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	mint, maxt := int64(0), int64(scrapes)*15000
	// Every member at once (copies shared by the group), then each alone.
	compareModels(t, want, readAll(t, h, mint, maxt))
	for _, l := range lsets {
		m := labels.MustNewMatcher(labels.MatchEqual, "idx", l.Get("idx"))
		compareModels(t, model{l.String(): want[l.String()]}, readAll(t, h, mint, maxt, m))
	}
	// AppendFloats over the same copies.
	q, err := h.Querier(mint, maxt)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "m"))
	n := 0
	for ss.Next() {
		s := ss.At()
		ts, vs, err := s.(fastread.FloatAppender).AppendFloats(nil, nil, mint, maxt)
		if err != nil {
			t.Fatal(err)
		}
		exp := want[s.Labels().String()]
		if len(ts) != len(exp) {
			t.Fatalf("%s: %d samples, want %d", s.Labels(), len(ts), len(exp))
		}
		for k := range ts {
			if bits, ok := exp[ts[k]]; !ok || bits != math.Float64bits(vs[k]) || k > 0 && ts[k] <= ts[k-1] {
				t.Fatalf("%s: sample %d is (%d, %v), not the one appended at that time", s.Labels(), k, ts[k], vs[k])
			}
		}
		n++
	}
	if n != members {
		t.Fatalf("%d series selected, want %d", n, members)
	}
}

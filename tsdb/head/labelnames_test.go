package head

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// TestHeadLabelsWithMatchers: label names and values under matchers equal
// those computed from every series the matchers select, for series of one
// group with different label sets and values that repeat and alternate.
func TestHeadLabelsWithMatchers(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	rng := rand.New(rand.NewSource(2))
	var all []labels.Labels
	for i := range 30 {
		batch := &Batch{}
		for m := range 40 {
			kv := []string{"job", fmt.Sprint("j", i%3), "instance", fmt.Sprint("i", i)}
			for _, n := range []string{"cpu", "device", "mode", "le"} {
				if rng.Intn(2) == 0 {
					kv = append(kv, n, fmt.Sprint(n, rng.Intn(4)))
				}
			}
			l := series(fmt.Sprint("m", m%7), kv...)
			all = append(all, l)
			batch.Series = append(batch.Series, BatchSeries{Labels: l, Samples: []Sample{{T: 1000, V: 1}}})
		}
		if _, err := h.AppendBatch(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
	q, err := h.Querier(0, 2000)
	if err != nil {
		t.Fatal(err)
	}
	for _, ms := range [][]*labels.Matcher{
		{labels.MustNewMatcher(labels.MatchEqual, "instance", "i4")},
		{labels.MustNewMatcher(labels.MatchEqual, "job", "j1")},
		{labels.MustNewMatcher(labels.MatchRegexp, "mode", "mode[02]")},
		{labels.MustNewMatcher(labels.MatchEqual, "__name__", "m3"), labels.MustNewMatcher(labels.MatchNotEqual, "cpu", "")},
		{labels.MustNewMatcher(labels.MatchEqual, "instance", "none")},
	} {
		names, vals := map[string]bool{}, map[string]map[string]bool{}
		for _, l := range all {
			ok := true
			for _, m := range ms {
				ok = ok && m.Matches(l.Get(m.Name))
			}
			if !ok {
				continue
			}
			l.Range(func(l labels.Label) {
				names[l.Name] = true
				if vals[l.Name] == nil {
					vals[l.Name] = map[string]bool{}
				}
				vals[l.Name][l.Value] = true
			})
		}
		sortedKeys := func(m map[string]bool) []string {
			out := []string{}
			for k := range m {
				out = append(out, k)
			}
			slices.Sort(out)
			return out
		}
		got, _, err := q.LabelNames(context.Background(), nil, ms...)
		if want := sortedKeys(names); err != nil || !slices.Equal(got, want) {
			t.Errorf("%v: names %v (%v), want %v", ms, got, err, want)
		}
		for _, n := range []string{"__name__", "instance", "cpu", "mode", "le", "absent"} {
			got, _, err := q.LabelValues(context.Background(), n, nil, ms...)
			if want := sortedKeys(vals[n]); err != nil || !slices.Equal(got, want) {
				t.Errorf("%v: values of %s %v (%v), want %v", ms, n, got, err, want)
			}
		}
	}
}

// BenchmarkHeadLabelNames asks for the label names of one target's series
// (500 of 50,000), as a dashboard's variable query does.
func BenchmarkHeadLabelNames(b *testing.B) {
	h := openHead(b, b.TempDir(), nil)
	defer h.Close()
	for i := range 100 {
		batch := &Batch{}
		for m := range 500 {
			batch.Series = append(batch.Series, BatchSeries{Labels: series(fmt.Sprint("m", m%50), "job", "node", "instance", fmt.Sprint("i", i), "cpu", fmt.Sprint(m/50)),
				Samples: []Sample{{T: 15000, V: float64(m)}}})
		}
		if _, err := h.AppendBatch(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	q, err := h.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		b.Fatal(err)
	}
	sel := labels.MustNewMatcher(labels.MatchEqual, "instance", "i7")
	b.ReportAllocs()
	for b.Loop() {
		names, _, err := q.LabelNames(context.Background(), nil, sel)
		if err != nil || len(names) != 4 {
			b.Fatalf("%v %v", names, err)
		}
	}
}

package tenant

import (
	"context"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
)

// Label is the label a federated read adds to every series, naming its
// tenant (Cortex's and Mimir's name for it).
const Label = "__tenant_id__"

// Member is one tenant of a federated read.
type Member struct {
	ID string
	Q  storage.SampleAndChunkQueryable
}

// Federate returns a queryable over several tenants' data, the members
// members returns when a querier is made: each series carries Label with
// its tenant, a matcher on Label picks tenants, and the series of all
// tenants are merged.
func Federate(members func() []Member) storage.SampleAndChunkQueryable {
	return federated(members)
}

type federated func() []Member

// selectable reports whether tenant id passes the matchers on Label, and
// returns the other matchers.
func selectable(id string, ms []*labels.Matcher) ([]*labels.Matcher, bool) {
	var rest []*labels.Matcher
	for _, m := range ms {
		if m.Name != Label {
			rest = append(rest, m)
			continue
		}
		if !m.Matches(id) {
			return nil, false
		}
	}
	return rest, true
}

func (f federated) Querier(mint, maxt int64) (storage.Querier, error) {
	members := f()
	qs := make([]storage.Querier, 0, len(members))
	for _, m := range members {
		q, err := m.Q.Querier(mint, maxt)
		if err != nil {
			for _, q := range qs {
				q.Close()
			}
			return nil, err
		}
		qs = append(qs, &memberQuerier{Querier: q, id: m.ID})
	}
	return storage.NewMergeQuerier(qs, nil, storage.ChainedSeriesMerge), nil
}

func (f federated) ChunkQuerier(mint, maxt int64) (storage.ChunkQuerier, error) {
	members := f()
	qs := make([]storage.ChunkQuerier, 0, len(members))
	for _, m := range members {
		q, err := m.Q.ChunkQuerier(mint, maxt)
		if err != nil {
			for _, q := range qs {
				q.Close()
			}
			return nil, err
		}
		qs = append(qs, &memberChunkQuerier{ChunkQuerier: q, id: m.ID})
	}
	return storage.NewMergeChunkQuerier(qs, nil, storage.NewCompactingChunkSeriesMerger(storage.ChainedSeriesMerge)), nil
}

// labelOps are the label queries of one member, with Label added.
type labelOps struct {
	q  storage.LabelQuerier
	id string
}

func (o labelOps) values(ctx context.Context, name string, hints *storage.LabelHints, ms []*labels.Matcher) ([]string, annotations.Annotations, error) {
	rest, ok := selectable(o.id, ms)
	if !ok {
		return nil, nil, nil
	}
	if name == Label {
		if len(rest) > 0 { // only if the tenant has series matching the rest
			names, ws, err := o.q.LabelNames(ctx, hints, rest...)
			if err != nil || len(names) == 0 {
				return nil, ws, err
			}
		}
		return []string{o.id}, nil, nil
	}
	return o.q.LabelValues(ctx, name, hints, rest...)
}

func (o labelOps) names(ctx context.Context, hints *storage.LabelHints, ms []*labels.Matcher) ([]string, annotations.Annotations, error) {
	rest, ok := selectable(o.id, ms)
	if !ok {
		return nil, nil, nil
	}
	names, ws, err := o.q.LabelNames(ctx, hints, rest...)
	if err != nil || len(names) == 0 {
		return names, ws, err
	}
	i, _ := slices.BinarySearch(names, Label)
	return slices.Insert(slices.Clone(names), i, Label), ws, nil
}

type memberQuerier struct {
	storage.Querier
	id string
}

func (q *memberQuerier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return labelOps{q.Querier, q.id}.values(ctx, name, hints, ms)
}

func (q *memberQuerier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return labelOps{q.Querier, q.id}.names(ctx, hints, ms)
}

func (q *memberQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	rest, ok := selectable(q.id, ms)
	if !ok {
		return storage.EmptySeriesSet()
	}
	if len(rest) == 0 { // a selector of the tenant label alone: all its series
		rest = []*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+")}
	}
	return &memberSeriesSet{SeriesSet: q.Querier.Select(ctx, sortSeries, hints, rest...), id: q.id}
}

type memberSeriesSet struct {
	storage.SeriesSet
	id string
}

func (s *memberSeriesSet) At() storage.Series {
	in := s.SeriesSet.At()
	return &memberSeries{Series: in, lset: withTenant(in.Labels(), s.id)}
}

type memberSeries struct {
	storage.Series
	lset labels.Labels
}

func (s *memberSeries) Labels() labels.Labels { return s.lset }

func (s *memberSeries) Iterator(it chunkenc.Iterator) chunkenc.Iterator { return s.Series.Iterator(it) }

type memberChunkQuerier struct {
	storage.ChunkQuerier
	id string
}

func (q *memberChunkQuerier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return labelOps{q.ChunkQuerier, q.id}.values(ctx, name, hints, ms)
}

func (q *memberChunkQuerier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return labelOps{q.ChunkQuerier, q.id}.names(ctx, hints, ms)
}

func (q *memberChunkQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.ChunkSeriesSet {
	rest, ok := selectable(q.id, ms)
	if !ok {
		return storage.EmptyChunkSeriesSet()
	}
	if len(rest) == 0 {
		rest = []*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+")}
	}
	return &memberChunkSeriesSet{ChunkSeriesSet: q.ChunkQuerier.Select(ctx, sortSeries, hints, rest...), id: q.id}
}

type memberChunkSeriesSet struct {
	storage.ChunkSeriesSet
	id string
}

func (s *memberChunkSeriesSet) At() storage.ChunkSeries {
	in := s.ChunkSeriesSet.At()
	return &memberChunkSeries{ChunkSeries: in, lset: withTenant(in.Labels(), s.id)}
}

type memberChunkSeries struct {
	storage.ChunkSeries
	lset labels.Labels
}

func (s *memberChunkSeries) Labels() labels.Labels { return s.lset }

// withTenant returns lset with Label set to id.
func withTenant(lset labels.Labels, id string) labels.Labels {
	b := labels.NewBuilder(lset)
	b.Set(Label, id)
	return b.Labels()
}

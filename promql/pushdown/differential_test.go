package pushdown

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/teststorage"

	"github.com/tandem-tsdb/tandem/tsdb"
	"github.com/tandem-tsdb/tandem/tsdb/fastread"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// The differential tests compare the push-down engine with Prometheus's
// engine on random float data, in Prometheus's TSDB and in tandem's storage
// (its head alone, and with part of the data flushed to blocks).

// diffBlockStart is a multiple of tandem's default block range (2h); the
// random data starts 40 minutes before it and spans more than one and a half
// ranges, so that a flush writes its first 40 minutes to a block and keeps
// the rest in the head.
const (
	diffBlockStart = int64(1_699_999_200_000)
	diffStart      = diffBlockStart - 40*60*1000
	diffSpan       = (3*60 + 10) * 60 * 1000
	diffEnd        = diffStart + diffSpan
)

type diffMetric struct {
	name    string
	counter bool
}

// diffMetrics: counters with and without a counter suffix (the latter get the
// engine's "possible non-counter" info from rate/increase), gauges, and a
// metric the m_.* regex does not select.
var diffMetrics = []diffMetric{
	{"m_cpu_seconds_total", true},
	{"m_requests_total", true},
	{"m_errors", true},
	{"m_temperature_celsius", false},
	{"m_queue_length", false},
	{"node_load", false},
	{"net_bytes_total", true},
}

type diffSample struct {
	t int64
	v float64
}

type diffSeries struct {
	lset    labels.Labels
	samples []diffSample
}

// diffShape is the shape of a random data set.
type diffShape struct {
	series    int
	metrics   []diffMetric // diffMetrics if nil
	instances int          // 5 if 0
	// huge gives a few gauges a burst of values near the float64 maximum,
	// whose sums overflow.
	huge bool
}

// genDiffData returns random series between diffStart and diffEnd.
func genDiffData(rng *rand.Rand, shape diffShape) []diffSeries {
	metrics, instances := shape.metrics, shape.instances
	if metrics == nil {
		metrics = diffMetrics
	}
	if instances == 0 {
		instances = 5
	}
	type target struct {
		interval, phase int64
	}
	intervals := func() int64 {
		switch r := rng.Float64(); {
		case r < 0.7:
			return 15000
		case r < 0.8:
			return 10000
		case r < 0.9:
			return 30000
		default:
			return 60000
		}
	}
	targets := map[string]target{}
	seen := map[string]bool{}
	var out []diffSeries
	for len(out) < shape.series {
		m := metrics[rng.Intn(len(metrics))]
		job := []string{"a", "b", "c"}[rng.Intn(3)]
		inst := fmt.Sprintf("host-%d:9100", rng.Intn(instances))
		b := labels.NewScratchBuilder(5)
		b.Add(labels.MetricName, m.name)
		b.Add("job", job)
		b.Add("instance", inst)
		if rng.Float64() < 0.9 {
			b.Add("mode", []string{"user", "system", "idle"}[rng.Intn(3)])
		}
		if rng.Float64() < 0.95 {
			b.Add("cpu", fmt.Sprint(rng.Intn(4)))
		}
		b.Sort()
		lset := b.Labels()
		if seen[lset.String()] {
			continue
		}
		seen[lset.String()] = true

		// Members of a target share its scrape timestamps (aligned rows),
		// except a few with their own interval, a constant shift or jitter.
		tk := job + "/" + inst
		tg, ok := targets[tk]
		if !ok {
			tg = target{interval: intervals()}
			if rng.Float64() < 0.6 {
				tg.phase = rng.Int63n(tg.interval)
			}
			targets[tk] = tg
		}
		interval, phase := tg.interval, tg.phase
		if rng.Float64() < 0.1 {
			interval = intervals()
		}
		var shift, jitter int64
		switch r := rng.Float64(); {
		case r < 0.1:
			shift = 1 + rng.Int63n(5000)
		case r < 0.25:
			jitter = 1 + rng.Int63n(400)
		}

		first, last := diffStart, diffEnd
		if rng.Float64() < 0.25 {
			first += rng.Int63n(diffSpan * 2 / 3)
		}
		if rng.Float64() < 0.25 {
			last = first + rng.Int63n(last-first)
		}
		var (
			s      = diffSeries{lset: lset}
			v      float64
			incr   = rng.ExpFloat64() * 10
			center = rng.Float64()*100 - 50
			amp    = rng.Float64() * 40
			noise  = rng.Float64() * 5
			skip   int
		)
		if m.counter {
			v = math.Floor(rng.Float64() * 1000)
		}
		if rng.Float64() < 0.1 {
			incr = 0 // a counter that does not move
		}
		hugeFrom, hugeSign := int64(math.MaxInt64), 1.0
		if shape.huge && !m.counter && rng.Float64() < 0.1 {
			hugeFrom = diffStart + rng.Int63n(diffSpan)
			if rng.Intn(2) == 0 {
				hugeSign = -1
			}
		}
		stale := math.Float64frombits(value.StaleNaN)
		for ts := diffStart + phase; ts <= last; ts += interval {
			if ts < first {
				continue
			}
			if m.counter {
				if rng.Float64() < 0.8 {
					v += math.Round(rng.ExpFloat64() * incr)
				}
				if rng.Float64() < 0.006 {
					v = math.Floor(rng.Float64() * 10) // reset
				}
			} else {
				v = center + amp*math.Sin(float64(ts-diffStart)/float64(600000+rng.Intn(5))) + rng.NormFloat64()*noise
				if ts >= hugeFrom && ts < hugeFrom+30*60000 {
					v = hugeSign * math.MaxFloat64 / 2 * (1 - rng.Float64()/1e6)
				}
			}
			if skip > 0 {
				skip--
				continue
			}
			t := ts + shift
			if jitter > 0 {
				t += rng.Int63n(2*jitter+1) - jitter
			}
			if n := len(s.samples); n > 0 && t <= s.samples[n-1].t {
				continue
			}
			switch r := rng.Float64(); {
			case r < 0.03:
				continue // missed scrape
			case r < 0.033:
				skip = 6 + rng.Intn(35) // a longer gap
				continue
			case r < 0.036:
				s.samples = append(s.samples, diffSample{t, math.NaN()})
			case r < 0.04:
				s.samples = append(s.samples, diffSample{t, stale})
				skip = rng.Intn(12)
			default:
				s.samples = append(s.samples, diffSample{t, v})
			}
		}
		if last < diffEnd && rng.Float64() < 0.5 {
			// The series ends early, as a scrape target that went away.
			if n := len(s.samples); n > 0 && !value.IsStaleNaN(s.samples[n-1].v) {
				s.samples = append(s.samples, diffSample{s.samples[n-1].t + interval, stale})
			}
		}
		if len(s.samples) == 0 {
			continue
		}
		out = append(out, s)
	}
	if shape.metrics == nil {
		// A counter renamed half way: two series that differ only in their
		// name, never both in a range window. A range function of both
		// gives one series, which the engine merges.
		for i, name := range []string{"m_old_errors", "m_new_errors"} {
			s := diffSeries{lset: labels.FromStrings(labels.MetricName, name, "instance", "host-h:9100", "job", "h")}
			from := diffStart + int64(i)*100*60000
			for ts, v := from, 0.0; ts <= from+80*60000; ts += 15000 {
				v += float64(rng.Intn(5))
				s.samples = append(s.samples, diffSample{ts, v})
			}
			out = append(out, s)
		}
	}
	return out
}

// loadDiffData appends the series to st in time order across all series,
// committing one minute of data at a time.
func loadDiffData(t testing.TB, st storage.Appendable, data []diffSeries) {
	t.Helper()
	type ref struct {
		t    int64
		s, i int32
	}
	var all []ref
	for si, s := range data {
		for i, smp := range s.samples {
			all = append(all, ref{smp.t, int32(si), int32(i)})
		}
	}
	slices.SortStableFunc(all, func(a, b ref) int { return cmp.Compare(a.t, b.t) })
	ctx := context.Background()
	app := st.Appender(ctx)
	batchEnd := int64(math.MinInt64)
	for _, r := range all {
		smp := data[r.s].samples[r.i]
		if smp.t >= batchEnd {
			if err := app.Commit(); err != nil {
				t.Fatalf("commit: %v", err)
			}
			app = st.Appender(ctx)
			batchEnd = smp.t - smp.t%60000 + 60000
		}
		if _, err := app.Append(0, data[r.s].lset, smp.t, smp.v); err != nil {
			t.Fatalf("append %s %d: %v", data[r.s].lset, smp.t, err)
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// checkStored reads every series back from q and compares it with data.
func checkStored(t *testing.T, name string, q storage.Queryable, data []diffSeries) {
	t.Helper()
	querier, err := q.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer querier.Close()
	want := map[string][]diffSample{}
	for _, s := range data {
		want[s.lset.String()] = s.samples
	}
	ss := querier.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+"))
	got := 0
	for ss.Next() {
		s := ss.At()
		key := s.Labels().String()
		w, ok := want[key]
		if !ok {
			t.Errorf("%s: unexpected series %s", name, key)
			continue
		}
		got++
		it := s.Iterator(nil)
		i := 0
		for it.Next() != chunkenc.ValNone {
			ts, v := it.At()
			if i >= len(w) || w[i].t != ts || !sameValue(w[i].v, v) {
				t.Errorf("%s: series %s sample %d: got %d %v, want %v", name, key, i, ts, v, w[min(i, len(w)-1)])
				break
			}
			i++
		}
		if err := it.Err(); err != nil {
			t.Errorf("%s: %s: %v", name, key, err)
		}
		if i < len(w) {
			t.Errorf("%s: series %s: %d samples, want %d", name, key, i, len(w))
		}
	}
	if err := ss.Err(); err != nil {
		t.Fatal(err)
	}
	if got != len(data) {
		t.Errorf("%s: %d series, want %d", name, got, len(data))
	}
}

// sameValue reports whether a stored value is the one appended: equal, or
// both NaN and both or neither a stale marker.
func sameValue(want, got float64) bool {
	if math.IsNaN(want) || math.IsNaN(got) {
		return math.IsNaN(want) && math.IsNaN(got) && value.IsStaleNaN(want) == value.IsStaleNaN(got)
	}
	return want == got
}

// diffEngineOpts are the options of every engine of these tests.
func diffEngineOpts() promql.EngineOpts {
	return promql.EngineOpts{
		MaxSamples:               50_000_000,
		Timeout:                  time.Minute,
		LookbackDelta:            5 * time.Minute,
		EnableAtModifier:         true,
		EnableNegativeOffset:     true,
		NoStepSubqueryIntervalFn: func(int64) int64 { return 60000 },
	}
}

func newPlainEngine(t testing.TB, opts promql.EngineOpts) *promql.Engine {
	e := promql.NewEngine(opts)
	t.Cleanup(func() { e.Close() })
	return e
}

func newPushdownEngine(t testing.TB, opts promql.EngineOpts, workers int) *Engine {
	e := NewEngine(opts, Options{Workers: workers})
	t.Cleanup(func() { e.Prometheus().Close(); e.fallback.Close() })
	return e
}

// queryTime is an instant query (step 0, at start) or a range query.
type queryTime struct {
	start, end, step int64
}

func (qt queryTime) String() string {
	if qt.step == 0 {
		return fmt.Sprintf("instant at %d (data start%+ds)", qt.start, (qt.start-diffStart)/1000)
	}
	return fmt.Sprintf("range %d..%d step %s (data start%+ds..%+ds)", qt.start, qt.end, time.Duration(qt.step)*time.Millisecond, (qt.start-diffStart)/1000, (qt.end-diffStart)/1000)
}

type cmpPoint struct {
	T int64
	F float64
}

type cmpSeries struct {
	Labels labels.Labels
	Points []cmpPoint
}

// cmpResult is a copy of a query's result (the engine reuses the memory of
// a result once its query is closed).
type cmpResult struct {
	Type   string
	Err    error
	Series []cmpSeries
	Annos  []string
}

func (r cmpResult) String() string {
	var b strings.Builder
	if r.Err != nil {
		fmt.Fprintf(&b, "error: %v\n", r.Err)
	}
	fmt.Fprintf(&b, "type %s, %d series, annotations %q\n", r.Type, len(r.Series), r.Annos)
	for i, s := range r.Series {
		if i == 20 {
			fmt.Fprintf(&b, "  ...\n")
			break
		}
		pts := s.Points
		more := ""
		if len(pts) > 12 {
			pts, more = pts[:12], " ..."
		}
		fmt.Fprintf(&b, "  %s %v%s\n", s.Labels, pts, more)
	}
	return b.String()
}

func execQuery(ctx context.Context, eng promql.QueryEngine, st storage.Queryable, opts promql.QueryOpts, qs string, qt queryTime) cmpResult {
	var (
		q   promql.Query
		err error
	)
	if qt.step == 0 {
		q, err = eng.NewInstantQuery(ctx, st, opts, qs, time.UnixMilli(qt.start))
	} else {
		q, err = eng.NewRangeQuery(ctx, st, opts, qs, time.UnixMilli(qt.start), time.UnixMilli(qt.end), time.Duration(qt.step)*time.Millisecond)
	}
	if err != nil {
		return cmpResult{Err: err}
	}
	defer q.Close()
	res := q.Exec(ctx)
	out := cmpResult{Err: res.Err}
	warns, infos := res.Warnings.AsStrings(qs, 0, 0)
	out.Annos = append(warns, infos...)
	slices.Sort(out.Annos)
	if res.Err != nil {
		return out
	}
	out.Type = string(res.Value.Type())
	switch v := res.Value.(type) {
	case promql.Matrix:
		for _, s := range v {
			cs := cmpSeries{Labels: s.Metric.Copy()}
			for _, p := range s.Floats {
				cs.Points = append(cs.Points, cmpPoint{p.T, p.F})
			}
			if len(s.Histograms) > 0 {
				out.Err = fmt.Errorf("unexpected histograms in %s", s.Metric)
			}
			out.Series = append(out.Series, cs)
		}
	case promql.Vector:
		for _, s := range v {
			if s.H != nil {
				out.Err = fmt.Errorf("unexpected histogram in %s", s.Metric)
			}
			out.Series = append(out.Series, cmpSeries{Labels: s.Metric.Copy(), Points: []cmpPoint{{s.T, s.F}}})
		}
	case promql.Scalar:
		out.Series = []cmpSeries{{Labels: labels.EmptyLabels(), Points: []cmpPoint{{v.T, v.V}}}}
	default:
		out.Err = fmt.Errorf("unexpected result type %s", res.Value.Type())
	}
	sort.SliceStable(out.Series, func(i, j int) bool { return labels.Compare(out.Series[i].Labels, out.Series[j].Labels) < 0 })
	return out
}

func floatsEqual(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	if a == b {
		return true
	}
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return false
	}
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

// diffResults describes the first difference between want and got, or
// returns "".
func diffResults(want, got cmpResult) string {
	if (want.Err == nil) != (got.Err == nil) {
		return fmt.Sprintf("errors differ: want %v, got %v", want.Err, got.Err)
	}
	if !slices.Equal(want.Annos, got.Annos) {
		return fmt.Sprintf("annotations differ:\n  want %q\n  got  %q", want.Annos, got.Annos)
	}
	if want.Err != nil {
		return ""
	}
	if want.Type != got.Type {
		return fmt.Sprintf("result types differ: want %s, got %s", want.Type, got.Type)
	}
	if len(want.Series) != len(got.Series) {
		return fmt.Sprintf("%d series, want %d", len(got.Series), len(want.Series))
	}
	for i := range want.Series {
		w, g := want.Series[i], got.Series[i]
		if !labels.Equal(w.Labels, g.Labels) {
			return fmt.Sprintf("series %d: labels %s, want %s", i, g.Labels, w.Labels)
		}
		if len(w.Points) != len(g.Points) {
			return fmt.Sprintf("series %s: %d points, want %d", w.Labels, len(g.Points), len(w.Points))
		}
		for k := range w.Points {
			if w.Points[k].T != g.Points[k].T {
				return fmt.Sprintf("series %s point %d: timestamp %d, want %d", w.Labels, k, g.Points[k].T, w.Points[k].T)
			}
			if !floatsEqual(w.Points[k].F, g.Points[k].F) {
				return fmt.Sprintf("series %s at %d: value %v, want %v", w.Labels, w.Points[k].T, g.Points[k].F, w.Points[k].F)
			}
		}
	}
	return ""
}

// diffQueries returns n random aggregations of selectors and of range
// functions of selectors.
func diffQueries(rng *rand.Rand, n int, metrics []diffMetric) []string {
	if metrics == nil {
		metrics = diffMetrics
	}
	ops := []string{"sum", "avg", "count", "min", "max", "group"}
	groupings := []string{"", " by(job)", " by(instance, mode)", " without(cpu)", " without(instance, cpu, mode)"}
	fns := []string{"rate", "increase", "delta", "sum_over_time", "avg_over_time", "count_over_time", "min_over_time", "max_over_time", "last_over_time"}
	ranges := []string{"1m", "5m", "17m"}
	offsets := []string{"", " offset 3m", " offset -2m"}
	selector := func() string {
		m := metrics[rng.Intn(len(metrics))].name
		switch rng.Intn(4) {
		case 0:
			return m + `{job="a"}`
		case 1:
			return `{__name__=~"m_.*"}`
		case 2:
			return m + `{mode!="idle",cpu=~"[01]"}`
		}
		return m
	}
	var qs []string
	for i := 0; i < n; i++ {
		op := ops[i%len(ops)]
		g := groupings[(i/len(ops))%len(groupings)]
		var inner string
		if rng.Intn(4) == 0 {
			inner = selector() + offsets[rng.Intn(len(offsets))]
		} else {
			inner = fmt.Sprintf("%s(%s[%s]%s)", fns[rng.Intn(len(fns))], selector(), ranges[rng.Intn(len(ranges))], offsets[rng.Intn(len(offsets))])
		}
		if rng.Intn(2) == 0 {
			qs = append(qs, fmt.Sprintf("%s%s(%s)", op, g, inner))
		} else {
			qs = append(qs, fmt.Sprintf("%s(%s)%s", op, inner, g))
		}
	}
	return qs
}

// diffCompositions have pushed-down aggregations inside other expressions
// (and a few that are not pushed down, which must be equal all the same).
var diffCompositions = []string{
	`sum by(job)(rate(m_requests_total[5m])) / on(job) count by(job)(m_requests_total)`,
	`sum by(job)(rate(m_cpu_seconds_total[5m])) / ignoring(job) group_left sum(rate(m_cpu_seconds_total[5m]))`,
	`abs(sum(delta(m_temperature_celsius[5m])))`,
	`-sum by(instance)(m_queue_length)`,
	`sum(sum by(job)(m_queue_length))`,
	`count(count by(instance)(m_cpu_seconds_total))`,
	`topk(2, sum by(instance)(rate(m_cpu_seconds_total[5m])))`,
	`bottomk(1, avg by(job)(m_temperature_celsius))`,
	`quantile(0.5, sum by(instance)(m_queue_length))`,
	`absent(sum(nonexistent))`,
	`absent(nonexistent)`,
	`absent(sum(m_requests_total))`,
	`sum(rate(m_requests_total[5m])) > 0`,
	`sum by(job)(increase(m_errors[17m])) > 10`,
	`sum(rate(m_errors[5m])) or vector(0)`,
	`sum(m_queue_length) and on() (count(node_load) > 3)`,
	`avg(m_temperature_celsius) * 2 + min(m_temperature_celsius)`,
	`max_over_time(sum(rate(m_requests_total[5m]))[30m:1m])`,
	`max_over_time(sum by(job)(m_queue_length)[20m:])`,
	`sum by(__name__)(m_queue_length)`,
	`sum by(__name__)({__name__=~"m_.*"})`,
	`count by(__name__, job)({__name__=~".+"})`,
	`sum(rate(m_requests_total[5m] @ end()))`,
	`sum(m_queue_length @ start())`,
	`timestamp(sum(m_queue_length))`,
	`sum(sum_over_time(m_queue_length[5m])) / sum(count_over_time(m_queue_length[5m]))`,
	`sum by(job)(rate(m_errors[5m] offset 3m))`,
	`sum without(instance, cpu, mode)(last_over_time(node_load[1m] offset -2m))`,
	`sum by(job)(rate(nonexistent[5m]))`,
	`group by(mode)(m_cpu_seconds_total{mode=""})`,
	`sum(scalar(sum(node_load)) * m_queue_length)`,
	`clamp_min(sum by(instance)(irate(m_requests_total[5m])), 0)`,
	`label_replace(sum by(job)(m_queue_length), "x", "$1", "job", "(.*)")`,
	// Range functions of series that differ only in their name and are
	// merged by the engine (m_old_errors and m_new_errors).
	`sum by(job)(rate({job="h"}[5m]))`,
	`1 + sum(increase({__name__=~"m_(old|new)_errors"}[17m] offset 3m)) by (instance)`,
	"count(m_queue_length) -\n  max(rate({job=\"h\"}[1m])) by (job, instance) * 2",
	// Range functions without an aggregation: one output series per input
	// series (pushed down with immediate name removal).
	`rate(m_requests_total[5m])`,
	`increase(m_cpu_seconds_total{mode="idle"}[17m] offset 3m)`,
	`delta(m_temperature_celsius[5m] offset -2m)`,
	`max_over_time(m_temperature_celsius[17m])`,
	`min_over_time(m_queue_length[1m])`,
	`avg_over_time(m_temperature_celsius[5m]) - sum_over_time(m_queue_length[5m])`,
	`count_over_time({job="a"}[5m])`,
	`last_over_time({job="a"}[5m])`,
	`last_over_time(m_queue_length[1m] offset 3m)`,
	`rate({__name__=~"m_.*"}[5m])`,
	`rate({job="h"}[5m])`,
	`topk(3, rate(m_requests_total[5m]))`,
	`rate(m_requests_total[5m]) * on(instance) group_left avg by(instance)(m_queue_length)`,
	`absent(rate(nonexistent[5m]))`,
	`absent_over_time(nonexistent[5m])`,
	`timestamp(rate(m_requests_total[5m]))`,
	`sort_desc(increase(m_errors[17m]))`,
	`histogram_quantile(0.9, rate(m_requests_total[5m]))`,
}

// diffTimes returns the instant and range queries of a run.
func diffTimes(rng *rand.Rand) []queryTime {
	mid := diffStart + rng.Int63n(diffSpan)
	win := diffStart + rng.Int63n(diffSpan-30*60000)
	return []queryTime{
		{start: diffEnd},                 // the very end of the data
		{start: diffEnd + 2*60000 + 123}, // after the end, within the lookback
		{start: diffEnd + 20*60000},      // long after the end
		{start: diffStart - 60000},       // before the data
		{start: mid},
		{start: diffBlockStart + 1}, // just after the flushed block
		{start: diffStart - 10*60000, end: diffEnd + 10*60000, step: 60000},
		{start: diffStart + 1234, end: diffEnd + 7*60000, step: 7*60000 + 13000},
		{start: win, end: win + 30*60000, step: 15000},
		{start: diffStart - 3*60000, end: diffStart + 20*60000, step: 15000},
		{start: diffEnd + 6*60000, end: diffEnd + 40*60000, step: 60000},
	}
}

type diffStore struct {
	name    string
	q       storage.Queryable
	workers []int
}

// raceEnabled reports whether the test binary was built with -race, which
// makes the engines about ten times slower: the tests then run fewer queries.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// TestDifferential compares the push-down engine's answers with Prometheus's
// engine's on random data, in Prometheus's storage and in tandem's.
func TestDifferential(t *testing.T) {
	// The wide data set has more than 256 series of each metric, so that
	// the push-down evaluates a selector on several workers, and values
	// whose sums overflow.
	wide := []diffMetric{{"m_cpu_seconds_total", true}, {"m_temperature_celsius", false}}
	runs := []diffRun{
		{seed: 1, shape: diffShape{series: 60}, queries: 40, compositions: true},
		{seed: 2, shape: diffShape{series: 100}, queries: 40, compositions: true},
		{seed: 3, shape: diffShape{series: 150}, queries: 40, compositions: true},
		{seed: 4, shape: diffShape{series: 80}, queries: 40, compositions: true},
		{seed: 5, shape: diffShape{series: 120}, queries: 40, compositions: true},
		{seed: 6, shape: diffShape{series: 600, metrics: wide, instances: 10, huge: true}, queries: 12, extra: []string{
			`sum(m_temperature_celsius)`,
			`sum by(job)(m_temperature_celsius)`,
			`avg without(cpu)(m_temperature_celsius)`,
			`sum(sum_over_time(m_temperature_celsius[5m]))`,
			`avg by(mode)(avg_over_time(m_temperature_celsius[17m]))`,
			`sum by(instance)(rate(m_cpu_seconds_total[5m]))`,
			`sum(delta(m_temperature_celsius[5m]))`,
			`sum by(job)(delta(m_temperature_celsius[10m]))`,
			// Range functions alone: one output series per input series.
			`rate(m_cpu_seconds_total[5m])`,
			`max_over_time(m_temperature_celsius[10m])`,
		}},
		// The engines of all runs have the same options, these with the
		// experimental delayed name removal.
		{seed: 7, shape: diffShape{series: 90}, queries: 20, compositions: true, delayedNameRemoval: true},
	}
	switch {
	case testing.Short():
		runs = runs[:2]
	case raceEnabled():
		for i := range runs {
			runs[i].queries /= 3
			runs[i].sparse = true
		}
	}
	var evaluated, fallbacks, parallel int64
	for _, r := range runs {
		t.Run(fmt.Sprintf("seed=%d", r.seed), func(t *testing.T) {
			st := differentialRun(t, r)
			evaluated += st.evaluated
			fallbacks += st.fallbacks
			parallel += st.parallel
		})
	}
	// Fallbacks are checked per query in differentialRun: only range
	// functions of selectors of several metric names may have them.
	t.Logf("pushed down: %d evaluated here, %d handed back to the engine; %d selects of 256 series or more, or streams, on several workers", evaluated, fallbacks, parallel)
	if want := int64(100 * len(runs)); evaluated < want {
		t.Errorf("only %d subexpressions were pushed down, want at least %d", evaluated, want)
	}
	if !testing.Short() && parallel == 0 {
		t.Error("no subexpression was large enough to be evaluated on several workers")
	}
}

type diffStats struct {
	evaluated, fallbacks int64
	// parallel counts the Selects of at least 256 series through the
	// engine with 3 workers (those the push-down splits among its
	// workers), and the streams cut in several parts.
	parallel int64
}

// countingQueryable counts the Selects of at least 256 series on its
// queriers, and the streams read by several workers.
type countingQueryable struct {
	storage.Queryable
	wide *atomic.Int64
}

func (q countingQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	qr, err := q.Queryable.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	if _, ok := qr.(fastread.Streamer); ok {
		return countingStreamer{countingQuerier{qr, q.wide}}, nil
	}
	return countingQuerier{qr, q.wide}, nil
}

// countingStreamer is a countingQuerier over a querier that streams: it
// counts the streams cut in several parts (read by several workers).
type countingStreamer struct{ countingQuerier }

func (q countingStreamer) SelectStream(ctx context.Context, parts int, hints *storage.SelectHints, ms ...*labels.Matcher) []storage.SeriesSet {
	sets := q.Querier.(fastread.Streamer).SelectStream(ctx, parts, hints, ms...)
	if len(sets) > 1 {
		q.wide.Add(1)
	}
	return sets
}

type countingQuerier struct {
	storage.Querier
	wide *atomic.Int64
}

func (q countingQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	ss := q.Querier.Select(ctx, sortSeries, hints, ms...)
	var list []storage.Series
	for ss.Next() {
		list = append(list, ss.At())
	}
	if len(list) >= 256 {
		q.wide.Add(1)
	}
	return &listSeriesSet{list: list, i: -1, err: ss.Err(), warn: ss.Warnings()}
}

type listSeriesSet struct {
	list []storage.Series
	i    int
	err  error
	warn annotations.Annotations
}

func (s *listSeriesSet) Next() bool                        { s.i++; return s.i < len(s.list) }
func (s *listSeriesSet) At() storage.Series                { return s.list[s.i] }
func (s *listSeriesSet) Err() error                        { return s.err }
func (s *listSeriesSet) Warnings() annotations.Annotations { return s.warn }

// diffFailure collects the differences of one query.
type diffFailure struct {
	query, detail string // the first difference
	engines       map[string]bool
	n             int
}

// mayCollide reports whether qs has a range function of a selector that can
// select several metric names: the function's output series may then differ
// only in the name they drop, and the push-down hands such a subexpression
// back to Prometheus's engine (which merges or fails them) when they do.
// Other subexpressions of float data must all be evaluated by the push-down.
func mayCollide(t testing.TB, qs string) bool {
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(qs)
	if err != nil {
		t.Fatalf("%s: %v", qs, err)
	}
	collide := false
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		ms, ok := n.(*parser.MatrixSelector)
		if !ok {
			return nil
		}
		vs, ok := ms.VectorSelector.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				return nil
			}
		}
		collide = true
		return nil
	})
	return collide
}

// diffRun is one run of TestDifferential: a data set and its queries.
type diffRun struct {
	seed         int64
	shape        diffShape
	queries      int      // random aggregations
	extra        []string // and these
	compositions bool     // and diffCompositions
	sparse       bool     // run each query at every other time only
	// delayedNameRemoval sets the engines' EnableDelayedNameRemoval.
	delayedNameRemoval bool
}

func differentialRun(t *testing.T, r diffRun) diffStats {
	seed, shape := r.seed, r.shape
	rng := rand.New(rand.NewSource(seed))
	data := genDiffData(rng, shape)

	prom := teststorage.New(t)
	loadDiffData(t, prom, data)

	hopts := head.DefaultOptions()
	hopts.WALSyncInterval = 0
	hopts.Now = func() int64 { return 1 << 50 }
	head, err := tsdb.OpenDB(t.TempDir(), tsdb.DBOptions{Head: hopts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { head.Close() })
	loadDiffData(t, head, data)

	// The same data with its first 40 minutes flushed to a block.
	flushed, err := tsdb.OpenDB(t.TempDir(), tsdb.DBOptions{Head: hopts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flushed.Close() })
	loadDiffData(t, flushed, data)
	if err := flushed.Flush(false); err != nil {
		t.Fatal(err)
	}
	if len(flushed.Blocks()) == 0 {
		t.Fatal("the flush wrote no block")
	}

	checkStored(t, "prometheus", prom, data)
	checkStored(t, "tandem", head, data)
	checkStored(t, "tandem flushed", flushed, data)

	var wide atomic.Int64
	stores := []diffStore{
		// Prometheus's queriers do not allow iterating the series of one
		// Select concurrently.
		{"prometheus", prom, []int{1}},
		{"tandem", head, []int{1, 3}},
		{"tandem flushed", flushed, []int{1, 3}},
	}
	opts := diffEngineOpts()
	opts.EnableDelayedNameRemoval = r.delayedNameRemoval
	plain := newPlainEngine(t, opts)
	engines := map[int]*Engine{1: newPushdownEngine(t, opts, 1), 3: newPushdownEngine(t, opts, 3)}

	ctx := context.Background()
	queries := diffQueries(rng, r.queries, shape.metrics)
	queries = append(queries, r.extra...)
	if r.compositions {
		queries = append(queries, diffCompositions...)
	}
	times := diffTimes(rng)
	var (
		failures []*diffFailure
		byQuery  = map[string]*diffFailure{}
		total    int
		storages = map[string]int{}
		// evaluations counts the (query, time) pairs.
		evaluations int
	)
	fail := func(qs, engine, detail string) {
		total++
		f := byQuery[qs]
		if f == nil {
			f = &diffFailure{query: qs, detail: detail, engines: map[string]bool{}}
			byQuery[qs] = f
			failures = append(failures, f)
		}
		f.engines[engine] = true
		f.n++
	}
	for qi, qs := range queries {
		collide := mayCollide(t, qs)
		for ti, qt := range times {
			if r.sparse && (qi+ti)%2 != 0 {
				continue
			}
			evaluations++
			var ref cmpResult
			for si, st := range stores {
				want := execQuery(ctx, plain, st.q, nil, qs, qt)
				if si == 0 {
					ref = want
				} else if d := diffResults(ref, want); d != "" {
					// Not the push-down's business (checkStored compares
					// the data), and not always a bug: topk, bottomk and
					// quantile break ties, NaN ones included, in the
					// order of the series, which differs between storages.
					if storages[qs] == 0 {
						t.Logf("Prometheus's engine differs on %s and prometheus: %s, %s: %s", st.name, qs, qt, d)
					}
					storages[qs]++
				}
				for _, w := range st.workers {
					q := st.q
					if w > 1 {
						q = countingQueryable{q, &wide}
					}
					_, fb0 := engines[w].Counts()
					got := execQuery(ctx, engines[w], q, nil, qs, qt)
					if _, fb := engines[w].Counts(); fb != fb0 && !collide {
						fail(qs, fmt.Sprintf("%s/workers=%d", st.name, w), fmt.Sprintf("%s, %s: handed back to Prometheus's engine", st.name, qt))
					}
					if d := diffResults(want, got); d != "" {
						fail(qs, fmt.Sprintf("%s/workers=%d", st.name, w),
							fmt.Sprintf("%s, %s, %s\nprometheus engine: %s\npush-down: %s", st.name, qt, d, want, got))
					}
				}
			}
		}
	}
	for i, f := range failures {
		if i == 15 {
			var rest []string
			for _, f := range failures[i:] {
				rest = append(rest, fmt.Sprintf("  %s (%d differences)", f.query, f.n))
			}
			t.Errorf("and %d more queries:\n%s", len(failures)-i, strings.Join(rest, "\n"))
			break
		}
		engines := slices.Sorted(maps.Keys(f.engines))
		t.Errorf("query %s: %d differences (%s); the first, on %s", f.query, f.n, strings.Join(engines, ", "), f.detail)
	}
	if total > 0 {
		t.Errorf("seed %d: %d differences in %d queries", seed, total, len(failures))
	}
	var st diffStats
	for _, e := range engines {
		ev, fb := e.Counts()
		st.evaluated += ev
		st.fallbacks += fb
	}
	st.parallel = wide.Load()
	t.Logf("seed %d: %d series, %d queries, %d evaluations; pushed down %d (%d selects of 256 series or more, or streams, on several workers), fallbacks %d",
		seed, len(data), len(queries), evaluations, st.evaluated, st.parallel, st.fallbacks)
	return st
}

// TestLookbackAndStats checks a per-query lookback delta on data with gaps
// longer than it, and that queries with Disable do not use the push-down.
func TestLookbackAndStats(t *testing.T) {
	rng := rand.New(rand.NewSource(42))
	// Series scraped every 15s with gaps of 70s to 4m: a 1m lookback loses
	// them where the default 5m does not.
	var data []diffSeries
	for i := 0; i < 24; i++ {
		b := labels.NewScratchBuilder(4)
		b.Add(labels.MetricName, []string{"g_a", "g_b"}[i%2])
		b.Add("job", []string{"a", "b", "c"}[i%3])
		b.Add("instance", fmt.Sprintf("host-%d", i/6))
		b.Add("cpu", fmt.Sprint(i%4))
		b.Sort()
		s := diffSeries{lset: b.Labels()}
		for ts := diffStart + int64(i%3)*1000; ts <= diffStart+60*60000; ts += 15000 {
			if rng.Float64() < 0.03 {
				ts += 60000 + rng.Int63n(180000)
				continue
			}
			s.samples = append(s.samples, diffSample{ts, rng.NormFloat64() * 10})
		}
		data = append(data, s)
	}
	prom := teststorage.New(t)
	loadDiffData(t, prom, data)
	hopts := head.DefaultOptions()
	hopts.WALSyncInterval = 0
	hopts.Now = func() int64 { return 1 << 50 }
	db, err := tsdb.OpenDB(t.TempDir(), tsdb.DBOptions{Head: hopts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	loadDiffData(t, db, data)

	plain := newPlainEngine(t, diffEngineOpts())
	pd := newPushdownEngine(t, diffEngineOpts(), 2)
	queries := []string{
		`count(g_a)`, `sum by(job)(g_a)`, `max without(cpu)(g_b)`, `avg by(instance)({__name__=~"g_.*"})`,
		`group by(job)(g_a offset 2m)`, `count by(job)(g_b) / on(job) count by(job)({__name__=~"g_.*"})`,
	}
	times := []queryTime{
		{start: diffStart, end: diffStart + 70*60000, step: 15000},
		{start: diffStart + 7, end: diffStart + 65*60000, step: 60000},
		{start: diffStart + 30*60000 + 500},
		{start: diffStart + 60*60000 + 61000},
	}
	ctx := context.Background()
	lookback := promql.NewPrometheusQueryOpts(false, time.Minute, nil)
	differs := false
	for _, st := range []diffStore{{"prometheus", prom, nil}, {"tandem", db, nil}} {
		for _, qs := range queries {
			for _, qt := range times {
				before, _ := pd.Counts()
				want := execQuery(ctx, plain, st.q, lookback, qs, qt)
				got := execQuery(ctx, pd, st.q, lookback, qs, qt)
				if d := diffResults(want, got); d != "" {
					t.Errorf("%s: lookback 1m: query %s, %s: %s\nprometheus engine: %s\npush-down: %s", st.name, qs, qt, d, want, got)
				}
				if after, _ := pd.Counts(); after == before {
					t.Errorf("%s: query %s, %s was not pushed down", st.name, qs, qt)
				}
				// The default lookback must give other answers somewhere, or
				// this test does not test the per-query one.
				if d := diffResults(want, execQuery(ctx, plain, st.q, nil, qs, qt)); d != "" {
					differs = true
				}

				// Queries with Disable, or with per-step statistics, are
				// left to the engine.
				before, _ = pd.Counts()
				for _, c := range []struct {
					ctx  context.Context
					opts promql.QueryOpts
				}{
					{Disable(ctx), lookback},
					{Disable(ctx), nil},
					{ctx, promql.NewPrometheusQueryOpts(true, time.Minute, nil)},
				} {
					got := execQuery(c.ctx, pd, st.q, c.opts, qs, qt)
					want := execQuery(ctx, plain, st.q, c.opts, qs, qt)
					if d := diffResults(want, got); d != "" {
						t.Errorf("%s: disabled: query %s, %s: %s", st.name, qs, qt, d)
					}
				}
				if after, _ := pd.Counts(); after != before {
					t.Errorf("%s: disabled query %s, %s was pushed down (%d more)", st.name, qs, qt, after-before)
				}
			}
		}
	}
	if !differs {
		t.Error("a 1m lookback gave the same answers as the default 5m: the data has no gaps that tell them apart")
	}
	if _, fb := pd.Counts(); fb != 0 {
		t.Errorf("%d fallbacks on float data", fb)
	}
}

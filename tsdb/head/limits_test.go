package head

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// appendEach appends one sample (ts, ts) of each of ls in one batch.
func appendEach(t testing.TB, h *Head, ts int64, ls ...labels.Labels) AppendResult {
	t.Helper()
	var b Batch
	for _, l := range ls {
		b.Series = append(b.Series, BatchSeries{Labels: l, Samples: []Sample{{T: ts, V: float64(ts)}}})
	}
	res, err := h.AppendBatch(context.Background(), &b)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// refusedCount returns the head's tandem_head_series_refused_total for reason.
func refusedCount(h *Head, reason error) float64 {
	return testutil.ToFloat64(h.metrics.seriesRefused[limitIndex(reason)])
}

// TestSeriesLimitsRefuseNewSeries: each limit refuses the new series that
// would exceed it, with its reason and a message naming the limit's key,
// value and what reached it; the rest of the batch is written, and existing
// series keep taking samples.
func TestSeriesLimitsRefuseNewSeries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		limits   SeriesLimits
		reason   error
		label    string
		existing []labels.Labels // created first, within the limit
		refused  labels.Labels   // new, beyond the limit
		other    labels.Labels   // new, not concerned by the limit (or empty)
		detail   string
	}{
		{"max_series", SeriesLimits{MaxSeries: 2}, ErrSeriesLimit, "series_limit",
			[]labels.Labels{series("a", "job", "j", "instance", "i1"), series("b", "job", "j", "instance", "i2")},
			series("c", "job", "j", "instance", "i1"), labels.EmptyLabels(),
			`per-tenant limit max_series (2) reached: series {__name__="c", instance="i1", job="j"} not created`},
		{"max_series_per_metric", SeriesLimits{MaxSeriesPerMetric: 2}, ErrSeriesPerMetricLimit, "series_per_metric_limit",
			[]labels.Labels{series("foo", "job", "j", "instance", "i1"), series("foo", "job", "j", "instance", "i2")},
			series("foo", "job", "j", "instance", "i3"), series("bar", "job", "j", "instance", "i3"),
			`per-tenant limit max_series_per_metric (2) reached for metric "foo": series {__name__="foo", instance="i3", job="j"} not created`},
		{"max_series_per_group", SeriesLimits{MaxSeriesPerGroup: 2}, ErrSeriesPerGroupLimit, "series_per_group_limit",
			[]labels.Labels{series("a", "job", "j", "instance", "i1"), series("b", "job", "j", "instance", "i1")},
			series("c", "job", "j", "instance", "i1"), series("c", "job", "j", "instance", "i2"),
			`per-tenant limit max_series_per_group (2) reached for group job="j",instance="i1": series {__name__="c", instance="i1", job="j"} not created`},
		{"max_groups", SeriesLimits{MaxGroups: 2}, ErrGroupLimit, "group_limit",
			[]labels.Labels{series("a", "job", "j", "instance", "i1"), series("a", "job", "j", "instance", "i2")},
			series("a", "job", "j", "instance", "i3"), series("b", "job", "j", "instance", "i1"),
			`per-tenant limit max_groups (2) reached: group job="j",instance="i3" of series {__name__="a", instance="i3", job="j"} not created`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			h := openHead(t, t.TempDir(), func(o *Options) { o.Limits = tc.limits; o.Registerer = reg })
			defer h.Close()
			if got := ReasonLabel(tc.reason); got != tc.label {
				t.Fatalf("ReasonLabel = %q, want %q", got, tc.label)
			}
			if !slices.Contains(Reasons, tc.reason) {
				t.Fatalf("%v is not in Reasons", tc.reason)
			}
			want := model{}
			for round := int64(0); round < 2; round++ {
				ts := 1000 * (round + 1)
				// The refused series carries two samples: both are counted.
				b := Batch{Series: []BatchSeries{
					{Labels: tc.existing[0], Samples: []Sample{{T: ts, V: 1}}},
					{Labels: tc.existing[1], Samples: []Sample{{T: ts, V: 2}}},
					{Labels: tc.refused, Samples: []Sample{{T: ts, V: 3}, {T: ts + 1, V: 4}}},
				}}
				want.Add(tc.existing[0], ts, 1)
				want.Add(tc.existing[1], ts, 2)
				written := 2
				if !tc.other.IsEmpty() {
					b.Series = append(b.Series, BatchSeries{Labels: tc.other, Samples: []Sample{{T: ts, V: 5}}})
					want.Add(tc.other, ts, 5)
					written++
				}
				res, err := h.AppendBatch(context.Background(), &b)
				if err != nil {
					t.Fatal(err)
				}
				if res.SamplesWritten != written || res.Rejected[tc.reason] != 2 || res.RejectedTotal() != 2 {
					t.Fatalf("round %d: written %d, rejected %v; want %d written, 2 rejected for %v", round, res.SamplesWritten, res.Rejected, written, tc.reason)
				}
				if got := res.Examples[tc.reason]; got != tc.detail {
					t.Fatalf("detail\n got %s\nwant %s", got, tc.detail)
				}
				err = res.Err()
				if !errors.Is(err, tc.reason) || !strings.Contains(err.Error(), tc.detail) {
					t.Fatalf("Err() = %v", err)
				}
				if got := refusedCount(h, tc.reason); got != float64(round+1) {
					t.Fatalf("series refused counter = %v, want %d", got, round+1)
				}
			}
			compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
			if got, wantN := h.counters.series.Load(), int64(len(want)); got != wantN {
				t.Fatalf("%d series in the head, want %d", got, wantN)
			}
			if got := testutil.ToFloat64(h.metrics.rejected.WithLabelValues(tc.label)); got != 4 {
				t.Fatalf("samples rejected for %s = %v, want 4", tc.label, got)
			}
			// The counters are registered, with every limit's reason.
			if n, err := testutil.GatherAndCount(reg, "tandem_head_series_refused_total", "tandem_head_metadata_dropped_total"); err != nil || n != len(limitReasons)+1 {
				t.Fatalf("gathered %d refused/dropped series (%v), want %d", n, err, len(limitReasons)+1)
			}
		})
	}
}

// TestSetSeriesLimitsAtRunTime lowers and raises the limits while the head
// runs: they apply to series created afterwards, and lowering one removes no series.
func TestSetSeriesLimitsAtRunTime(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	ls := func(from, to int) []labels.Labels {
		var out []labels.Labels
		for k := from; k < to; k++ {
			out = append(out, series("m", "job", "j", "instance", "i", "k", fmt.Sprint(k)))
		}
		return out
	}
	if res := appendEach(t, h, 1000, ls(0, 5)...); res.Err() != nil {
		t.Fatal(res.Err())
	}
	lower := SeriesLimits{MaxSeries: 3, MaxMetadata: 7}
	h.SetSeriesLimits(lower)
	if got := h.SeriesLimits(); got != lower {
		t.Fatalf("SeriesLimits() = %+v, want %+v", got, lower)
	}
	if got := h.Options().Limits; got != lower {
		t.Fatalf("Options().Limits = %+v, want %+v", got, lower)
	}
	res := appendEach(t, h, 2000, ls(0, 6)...)
	if res.SamplesWritten != 5 || res.Rejected[ErrSeriesLimit] != 1 {
		t.Fatalf("lowered: written %d, rejected %v; want the 5 existing written, 1 refused", res.SamplesWritten, res.Rejected)
	}
	if u := h.LimitUsage(); u.Series != 5 || u.Limits != lower {
		t.Fatalf("usage after lowering: %+v", u)
	}
	h.SetSeriesLimits(SeriesLimits{MaxSeries: 7})
	res = appendEach(t, h, 3000, ls(0, 8)...)
	if res.SamplesWritten != 7 || res.Rejected[ErrSeriesLimit] != 1 || !strings.Contains(res.Examples[ErrSeriesLimit], "max_series (7)") {
		t.Fatalf("raised: written %d, rejected %v %v; want 7 written, k=7 refused", res.SamplesWritten, res.Rejected, res.Examples)
	}
	h.SetSeriesLimits(SeriesLimits{})
	if res := appendEach(t, h, 4000, ls(0, 8)...); res.Err() != nil || res.SamplesWritten != 8 {
		t.Fatalf("unlimited: written %d, %v", res.SamplesWritten, res.Err())
	}
	if u := h.LimitUsage(); u.Series != 8 || u.Limits != (SeriesLimits{}) {
		t.Fatalf("usage: %+v", u)
	}
}

// TestSeriesLimitsIgnoredOnReplay: a head reopened with limits far below
// what it holds replays every series and every metadata entry (from the
// checkpoint and from the WAL segments after it), reports the usage, and
// refuses only new series and new metadata.
func TestSeriesLimitsIgnoredOnReplay(t *testing.T) {
	dir := t.TempDir()
	h := openHead(t, dir, nil)
	want := model{}
	write := func(h *Head, ls []labels.Labels, ts int64) {
		t.Helper()
		if res := appendEach(t, h, ts, ls...); res.Err() != nil {
			t.Fatal(res.Err())
		}
		for _, l := range ls {
			want.Add(l, ts, float64(ts))
		}
	}
	var before, after []labels.Labels
	for g := 0; g < 3; g++ {
		for m := 0; m < 2; m++ {
			for k := 0; k < 2; k++ {
				before = append(before, series(fmt.Sprint("m", m), "job", "j", "instance", fmt.Sprint("i", g), "k", fmt.Sprint(k)))
			}
		}
	}
	for k := 0; k < 5; k++ {
		after = append(after, series("m2", "job", "j", "instance", "i3", "k", fmt.Sprint(k)))
	}
	meta := func(names ...string) *Batch {
		var b Batch
		for _, n := range names {
			b.Metadata = append(b.Metadata, Metadata{Metric: n, Type: "gauge", Help: "help of " + n})
		}
		return &b
	}
	write(h, before, 1000)
	h.AppendBatch(context.Background(), meta("m0", "m1", "m2"))
	if err := h.Checkpoint(0); err != nil {
		t.Fatal(err)
	}
	write(h, after, 2000)
	write(h, before, 2000)
	h.AppendBatch(context.Background(), meta("m3"))
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}

	low := SeriesLimits{MaxSeries: 1, MaxSeriesPerMetric: 1, MaxSeriesPerGroup: 1, MaxGroups: 1, MaxMetadata: 1}
	h = openHead(t, dir, func(o *Options) { o.Limits = low })
	defer h.Close()
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	if md := h.MetricMetadata("", 0, 0); len(md) != 4 {
		t.Fatalf("metadata after replay: %v", md)
	}
	wantUsage := LimitUsage{Limits: low, Series: 17, Groups: 4, Metadata: 4,
		TopMetric: "m0", TopMetricSeries: 6, TopGroup: `job="j",instance="i3"`, TopGroupSeries: 5}
	if u := h.LimitUsage(); u != wantUsage {
		t.Fatalf("usage\n got %+v\nwant %+v", u, wantUsage)
	}
	// Existing series keep writing; a new one is refused; a new metric's
	// metadata is dropped silently, an existing one's is updated.
	res := appendEach(t, h, 3000, append(before, series("m0", "job", "j", "instance", "i0", "k", "new"))...)
	if res.SamplesWritten != len(before) || res.Rejected[ErrSeriesLimit] != 1 {
		t.Fatalf("after replay: written %d, rejected %v", res.SamplesWritten, res.Rejected)
	}
	b := meta("m9")
	b.Metadata = append(b.Metadata, Metadata{Metric: "m0", Type: "counter", Help: "changed"})
	if res, err := h.AppendBatch(context.Background(), b); err != nil || res.Err() != nil {
		t.Fatal(err, res.Err())
	}
	md := h.MetricMetadata("", 0, 0)
	if _, ok := md["m9"]; ok || len(md) != 4 || md["m0"][0].Help != "changed" {
		t.Fatalf("metadata beyond max_metadata: %v", md)
	}
	if got := testutil.ToFloat64(h.metrics.metadataDropped); got != 1 {
		t.Fatalf("metadata dropped = %v, want 1", got)
	}
}

// flushRanges does what DB.Flush does to the head, without writing blocks.
func flushRanges(t testing.TB, h *Head) {
	t.Helper()
	for {
		mint, maxt, ok := h.NextFlushRange(false)
		if !ok {
			return
		}
		r := h.ExportRange(mint, maxt)
		if err := r.Groups(func(*block.Group) error { return nil }); err != nil {
			t.Fatal(err)
		}
		r.Drop()
	}
}

// TestSeriesLimitsAfterGC: series and groups that GC removed no longer
// count, so new ones are created again.
func TestSeriesLimitsAfterGC(t *testing.T) {
	const hour = int64(3600000)
	now := int64(0)
	h := openHead(t, t.TempDir(), func(o *Options) {
		o.BlockRange = time.Hour
		o.Now = func() int64 { return now }
		o.Limits = SeriesLimits{MaxSeries: 3, MaxSeriesPerMetric: 3, MaxGroups: 2}
	})
	defer h.Close()
	a := series("m", "job", "j", "instance", "i", "k", "a")
	b := series("m", "job", "j", "instance", "i", "k", "b")
	c := series("m", "job", "j", "instance", "i", "k", "c")
	d := series("m", "job", "j", "instance", "i2")
	e := series("m", "job", "j", "instance", "i3")
	mustAppend := func(ls ...labels.Labels) {
		t.Helper()
		if res := appendEach(t, h, now, ls...); res.Err() != nil {
			t.Fatal(res.Err())
		}
	}
	for ; now < hour; now += 15000 {
		mustAppend(a, b, d)
	}
	for ; now < 4*hour; now += 15000 {
		mustAppend(a)
	}
	if res := appendEach(t, h, now, c, e); res.Rejected[ErrSeriesLimit] != 2 {
		t.Fatalf("before GC: rejected %v, want c and e refused by max_series", res.Rejected)
	}
	if u := h.LimitUsage(); u.Series != 3 || u.Groups != 2 || u.TopMetricSeries != 3 || u.TopGroupSeries != 2 {
		t.Fatalf("usage before GC: %+v", u)
	}
	flushRanges(t, h)
	if g, s := h.GC(now - hour); g != 1 || s != 2 {
		t.Fatalf("GC removed %d groups, %d series; want 1 (i2) and 2 (b, d)", g, s)
	}
	want := LimitUsage{Limits: h.SeriesLimits(), Series: 1, Groups: 1, TopMetric: "m", TopMetricSeries: 1, TopGroup: `job="j",instance="i"`, TopGroupSeries: 1}
	if u := h.LimitUsage(); u != want {
		t.Fatalf("usage after GC\n got %+v\nwant %+v", u, want)
	}
	now += 15000
	mustAppend(a, c, e)
	want.Series, want.Groups, want.TopMetricSeries, want.TopGroupSeries = 3, 2, 3, 2
	if u := h.LimitUsage(); u != want {
		t.Fatalf("usage after new series\n got %+v\nwant %+v", u, want)
	}
	now += 15000
	if res := appendEach(t, h, now, a, series("m", "job", "j", "instance", "i4")); res.SamplesWritten != 1 || res.Rejected[ErrSeriesLimit] != 1 {
		t.Fatalf("at the limit again: written %d, rejected %v", res.SamplesWritten, res.Rejected)
	}
}

// TestSeriesLimitsConcurrentOvershoot: appenders racing to create series
// overshoot a limit by at most their number.
func TestSeriesLimitsConcurrentOvershoot(t *testing.T) {
	const appenders, limit, perAppender = 8, 50, 60
	for _, tc := range []struct {
		name   string
		limits SeriesLimits
		reason error
		labels func(a, i int) labels.Labels
		count  func(h *Head) int
	}{
		{"max_series", SeriesLimits{MaxSeries: limit}, ErrSeriesLimit,
			func(a, i int) labels.Labels {
				return series("m", "job", "j", "instance", fmt.Sprint(a), "i", fmt.Sprint(i))
			},
			func(h *Head) int { return h.LimitUsage().Series }},
		{"max_series_per_metric", SeriesLimits{MaxSeriesPerMetric: limit}, ErrSeriesPerMetricLimit,
			func(a, i int) labels.Labels {
				return series("m", "job", "j", "instance", fmt.Sprint(a), "i", fmt.Sprint(i))
			},
			func(h *Head) int { return h.perMetric.get("m") }},
		{"max_series_per_group", SeriesLimits{MaxSeriesPerGroup: limit}, ErrSeriesPerGroupLimit,
			func(a, i int) labels.Labels {
				return series("m", "job", "j", "instance", "x", "a", fmt.Sprint(a), "i", fmt.Sprint(i))
			},
			func(h *Head) int { return h.LimitUsage().TopGroupSeries }},
		{"max_groups", SeriesLimits{MaxGroups: limit}, ErrGroupLimit,
			func(a, i int) labels.Labels { return series("m", "job", "j", "instance", fmt.Sprint(a*perAppender+i)) },
			func(h *Head) int { return h.LimitUsage().Groups }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := openHead(t, t.TempDir(), func(o *Options) { o.Limits = tc.limits })
			defer h.Close()
			var wg sync.WaitGroup
			var mu sync.Mutex
			written, refused := 0, 0
			start := make(chan struct{})
			for a := 0; a < appenders; a++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					w, r := 0, 0
					for i := 0; i < perAppender; i++ {
						b := Batch{Series: []BatchSeries{{Labels: tc.labels(a, i), Samples: []Sample{{T: 1000, V: 1}}}}}
						res, err := h.AppendBatch(context.Background(), &b)
						if err != nil {
							t.Error(err)
							return
						}
						w += res.SamplesWritten
						r += res.Rejected[tc.reason]
					}
					mu.Lock()
					written, refused = written+w, refused+r
					mu.Unlock()
				}()
			}
			close(start)
			wg.Wait()
			n := tc.count(h)
			if n < limit || n > limit+appenders {
				t.Fatalf("%d created against a limit of %d with %d appenders", n, limit, appenders)
			}
			if written != n || written+refused != appenders*perAppender {
				t.Fatalf("%d written, %d refused; %d created of %d", written, refused, n, appenders*perAppender)
			}
		})
	}
}

// TestLimitUsageTop: the usage names the metric and the group with the most series.
func TestLimitUsageTop(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	var ls []labels.Labels
	for k := 0; k < 4; k++ {
		ls = append(ls, series("big", "job", "j", "instance", "a", "k", fmt.Sprint(k)))
	}
	for k := 0; k < 3; k++ {
		ls = append(ls, series("small", "job", "j", "instance", fmt.Sprint("b", k)))
	}
	ls = append(ls, series("small", "job", "j", "instance", "c"), series("small", "job", "j", "instance", "c", "k", "2"))
	if res := appendEach(t, h, 1000, ls...); res.Err() != nil {
		t.Fatal(res.Err())
	}
	h.AppendBatch(context.Background(), &Batch{Metadata: []Metadata{{Metric: "big", Type: "gauge"}, {Metric: "small", Type: "gauge"}}})
	want := LimitUsage{Series: 9, Groups: 5, Metadata: 2, TopMetric: "small", TopMetricSeries: 5, TopGroup: `job="j",instance="a"`, TopGroupSeries: 4}
	if u := h.LimitUsage(); u != want {
		t.Fatalf("usage\n got %+v\nwant %+v", u, want)
	}
}

// TestSeriesLimitBoundsHeap: a sender creating 1M new series (in requests of
// 10k) against MaxSeries=10k leaves the head's live heap where 10k series
// put it; the refused series allocate nothing that stays. Unbounded, the same
// series hold several hundred MiB.
func TestSeriesLimitBoundsHeap(t *testing.T) {
	const limit, total, perBatch = 10000, 1000000, 10000
	const bound = 48 << 20 // 10k series take a few MiB
	h := openHead(t, t.TempDir(), func(o *Options) { o.Limits = SeriesLimits{MaxSeries: limit} })
	defer h.Close()
	b := Batch{Series: make([]BatchSeries, perBatch)}
	samples := make([]Sample, perBatch)
	var sb labels.ScratchBuilder
	fill := func(from int) {
		for j := range b.Series {
			id := from + j
			sb.Reset()
			sb.Add("__name__", "exploding")
			sb.Add("id", strconv.Itoa(id))
			sb.Add("instance", strconv.Itoa(id%100))
			sb.Add("job", "j")
			samples[j] = Sample{T: 1000, V: float64(id)}
			b.Series[j] = BatchSeries{Labels: sb.Labels(), Samples: samples[j : j+1]}
		}
	}
	before := heapAfterGC()
	start := time.Now()
	written, refused := 0, 0
	for from := 0; from < total; from += perBatch {
		fill(from)
		res, err := h.AppendBatch(context.Background(), &b)
		if err != nil {
			t.Fatal(err)
		}
		written += res.SamplesWritten
		refused += res.Rejected[ErrSeriesLimit]
	}
	after := heapAfterGC()
	growth := int64(after.live) - int64(before.live)
	t.Logf("%d series written, %d refused in %v; live heap grew by %.1f MiB", written, refused, time.Since(start), float64(growth)/(1<<20))
	if written != limit || refused != total-limit {
		t.Fatalf("%d written, %d refused; want %d and %d", written, refused, limit, total-limit)
	}
	if got := h.LimitUsage().Series; got != limit {
		t.Fatalf("%d series in the head, want %d", got, limit)
	}
	if growth > bound {
		t.Fatalf("live heap grew by %d MiB, more than %d MiB", growth>>20, bound>>20)
	}
}

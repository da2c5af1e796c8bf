package head

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/internal/tsdbtest"
	"github.com/tandem-tsdb/tandem/tsdb/record"
)

func openHead(t testing.TB, dir string, mod func(*Options)) *Head {
	t.Helper()
	opts := DefaultOptions()
	opts.WALSyncInterval = 0
	opts.Now = func() int64 { return 1 << 50 }
	if mod != nil {
		mod(&opts)
	}
	h, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Shared with the DB's tests (package tsdbtest).
type model = tsdbtest.Model

var (
	readSeries    = tsdbtest.ReadSeries
	compareModels = tsdbtest.CompareModels
	series        = tsdbtest.Series
)

// readAll returns every sample of every series in [mint, maxt] of the head.
func readAll(t testing.TB, h *Head, mint, maxt int64, ms ...*labels.Matcher) model {
	t.Helper()
	q, err := h.Querier(mint, maxt)
	if err != nil {
		t.Fatal(err)
	}
	return readSeries(t, q, mint, maxt, ms...)
}

// TestHeadAlignedAcrossRequests sends one target's scrape spread over several
// shards in any order: every member must stay aligned and every sample exact.
func TestHeadAlignedAcrossRequests(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	rng := rand.New(rand.NewSource(1))
	const members, scrapes, shards = 200, 300, 7
	want := model{}
	lsets := make([]labels.Labels, members)
	for i := range lsets {
		lsets[i] = series(fmt.Sprintf("m%d", i%20), "job", "node", "instance", "a:9100", "idx", fmt.Sprint(i))
	}
	for s := 0; s < scrapes; s++ {
		ts := int64(s) * 15000
		batches := make([]Batch, shards)
		for i, l := range lsets {
			v := float64(s*i) + rng.Float64()
			if i%50 == 0 && s%7 == 3 {
				continue // an occasional missing member
			}
			b := &batches[(i*31)%shards]
			b.Series = append(b.Series, BatchSeries{Labels: l, Samples: []Sample{{T: ts, V: v}}})
			want.Add(l, ts, v)
		}
		rng.Shuffle(len(batches), func(i, j int) { batches[i], batches[j] = batches[j], batches[i] })
		for i := range batches {
			res, err := h.AppendBatch(context.Background(), &batches[i])
			if err != nil || res.Err() != nil {
				t.Fatal(err, res.Err())
			}
		}
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	if n := h.counters.unaligned.Load(); n != 0 {
		t.Fatalf("%d members unaligned, want all aligned", n)
	}
	if n := h.counters.groups.Load(); n != 1 {
		t.Fatalf("%d groups, want 1", n)
	}
	// Compression: the shared timestamp column and XOR values.
	g := h.getOrCreateGroup(h.groupKey(lsets[0]))
	bytes, samples := 0, 0
	for _, c := range g.aligned.chunks {
		bytes += c.size()
		for i := range c.cols {
			samples += int(c.cols[i].n)
		}
	}
	if samples == 0 || float64(bytes)/float64(samples) > 10 {
		t.Fatalf("chunks hold %d samples in %d bytes", samples, bytes)
	}
	t.Logf("aligned chunks: %.2f bytes/sample", float64(bytes)/float64(samples))
}

// TestHeadUnalignedMember: a member on its own schedule must not multiply
// rows; it is detected and stored unaligned, with exact data.
func TestHeadUnalignedMember(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	want := model{}
	aligned := []labels.Labels{series("a", "job", "j", "instance", "i"), series("b", "job", "j", "instance", "i")}
	odd := series("odd", "job", "j", "instance", "i")
	for s := 0; s < 400; s++ {
		var b Batch
		ts := int64(s) * 10000
		for _, l := range aligned {
			b.Series = append(b.Series, BatchSeries{Labels: l, Samples: []Sample{{T: ts, V: float64(s)}}})
			want.Add(l, ts, float64(s))
		}
		b.Series = append(b.Series, BatchSeries{Labels: odd, Samples: []Sample{{T: ts + 3333, V: -float64(s)}}})
		want.Add(odd, ts+3333, -float64(s))
		if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	if n := h.counters.unaligned.Load(); n != 1 {
		t.Fatalf("%d unaligned members, want 1", n)
	}
	g := h.getOrCreateGroup(h.groupKey(odd))
	rows := 0
	for _, c := range g.aligned.chunks {
		rows += c.rows
	}
	if rows > 400+2*soloRowsToUnalign+1 {
		t.Fatalf("aligned table has %d rows for 400 scrapes: the odd member multiplied rows", rows)
	}
}

// TestHeadLaggingMember: a member that arrives after its group's rows were
// sealed (a slow shard catching up) is accepted and stored unaligned; once it
// lands on the group's open rows again it rejoins the shared columns.
func TestHeadLaggingMember(t *testing.T) {
	dir := t.TempDir()
	h := openHead(t, dir, func(o *Options) { o.ChunkRows = 32 })
	fast, slow := series("fast", "job", "j", "instance", "i"), series("slow", "job", "j", "instance", "i")
	want := model{}
	add := func(l labels.Labels, from, to int, v float64) {
		b := Batch{Series: []BatchSeries{{Labels: l}}}
		for s := from; s < to; s++ {
			b.Series[0].Samples = append(b.Series[0].Samples, Sample{T: int64(s) * 15000, V: v + float64(s)})
			want.Add(l, int64(s)*15000, v+float64(s))
		}
		if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	// Both in step, then the slow shard stalls while the fast one goes on.
	for s := 0; s < 50; s++ {
		add(fast, s, s+1, 0)
		add(slow, s, s+1, 1000)
	}
	add(fast, 50, 150, 0)
	add(slow, 50, 145, 1000) // catching up: far behind the open window
	if n := h.counters.unaligned.Load(); n != 1 {
		t.Fatalf("%d unaligned while lagging, want 1", n)
	}
	for s := 145; s < 200; s++ { // caught up: in step again
		if s >= 150 {
			add(fast, s, s+1, 0)
		}
		add(slow, s, s+1, 1000)
	}
	if n := h.counters.unaligned.Load(); n != 0 {
		t.Fatalf("%d unaligned after catching up, want 0", n)
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	// Ranges cutting through the interleaved shared/own data, and seeks.
	for _, r := range [][2]int64{{0, 14999}, {40 * 15000, 160 * 15000}, {100 * 15000, 100 * 15000}, {146 * 15000, 300 * 15000}} {
		got := readAll(t, h, r[0], r[1])
		w := model{}
		for k, ss := range want {
			for ts, v := range ss {
				if ts >= r[0] && ts <= r[1] {
					if w[k] == nil {
						w[k] = map[int64]uint64{}
					}
					w[k][ts] = v
				}
			}
		}
		compareModels(t, w, got)
	}
	q, _ := h.Querier(math.MinInt64, math.MaxInt64)
	ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "slow"))
	for ss.Next() {
		it := ss.At().Iterator(nil)
		for _, target := range []int64{0, 47 * 15000, 47*15000 + 1, 120 * 15000, 147 * 15000, 199 * 15000} {
			if it.Seek(target) != chunkenc.ValFloat || it.AtT() < target || it.AtT() > target+15000 {
				t.Fatalf("seek %d landed on %d", target, it.AtT())
			}
		}
		if it.Seek(200*15000) != chunkenc.ValNone {
			t.Fatal("seek past the end found a sample")
		}
	}
	h.Close()
	h2 := openHead(t, dir, func(o *Options) { o.ChunkRows = 32 })
	defer h2.Close()
	compareModels(t, want, readAll(t, h2, math.MinInt64, math.MaxInt64))
}

func TestHeadDuplicatesAndOrder(t *testing.T) {
	h := openHead(t, t.TempDir(), func(o *Options) { o.OutOfOrderWindow = 0 })
	defer h.Close()
	l := series("x", "job", "j", "instance", "i")
	app := func(samples ...Sample) AppendResult {
		res, err := h.AppendBatch(context.Background(), &Batch{Series: []BatchSeries{{Labels: l, Samples: samples}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	var in []Sample
	for i := 0; i < 500; i++ {
		in = append(in, Sample{T: int64(i) * 1000, V: float64(i) * 1.5})
	}
	if res := app(in...); res.Err() != nil || res.SamplesWritten != 500 {
		t.Fatalf("first write: %v, %d written", res.Err(), res.SamplesWritten)
	}
	// A retried request (all samples already stored, some sealed) is idempotent.
	if res := app(in...); res.Err() != nil || res.SamplesWritten != 500 {
		t.Fatalf("resend: %v, %d written", res.Err(), res.SamplesWritten)
	}
	res := app(Sample{T: 499000, V: 7})
	if !errors.Is(res.Err(), ErrDuplicateSample) {
		t.Fatalf("same timestamp, other value: %v", res.Err())
	}
	res = app(Sample{T: 1000, V: 7})
	if !errors.Is(res.Err(), ErrDuplicateSample) {
		t.Fatalf("old timestamp, other value: %v", res.Err())
	}
	res = app(Sample{T: 1500, V: 7})
	if !errors.Is(res.Err(), ErrOutOfOrderSample) {
		t.Fatalf("out of order: %v", res.Err())
	}
	res = app(Sample{T: (1 << 50) + 11*60*1000, V: 1})
	if !errors.Is(res.Err(), ErrTooFarInFuture) {
		t.Fatalf("future: %v", res.Err())
	}
	res, _ = h.AppendBatch(context.Background(), &Batch{Series: []BatchSeries{{Labels: labels.FromStrings("__name__", "y", "a", ""), Samples: in[:1]}}})
	if !errors.Is(res.Err(), ErrInvalidLabels) {
		t.Fatalf("empty label value: %v", res.Err())
	}
	want := model{}
	for _, s := range in {
		want.Add(l, s.T, s.V)
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
}

// TestHeadSpecialValuesAndReplay: staleness markers and every float bit
// pattern survive chunks and a restart; the layout is rebuilt too.
func TestHeadSpecialValuesAndReplay(t *testing.T) {
	dir := t.TempDir()
	h := openHead(t, dir, func(o *Options) { o.ChunkRows = 16 })
	specials := []float64{math.Float64frombits(value.StaleNaN), math.NaN(), math.Float64frombits(0x7ff8000000000001),
		math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, math.MaxFloat64, math.SmallestNonzeroFloat64, -1e-300}
	rng := rand.New(rand.NewSource(2))
	want := model{}
	for s := 0; s < 300; s++ {
		var b Batch
		for m := 0; m < 5; m++ {
			l := series("v", "job", "j", "instance", "i", "m", fmt.Sprint(m))
			ts := int64(s) * 1000
			if m == 4 {
				ts += 17 // on its own schedule: becomes unaligned
			}
			v := specials[rng.Intn(len(specials))]
			if rng.Intn(3) == 0 {
				v = math.Float64frombits(rng.Uint64())
			}
			b.Series = append(b.Series, BatchSeries{Labels: l, Samples: []Sample{{T: ts, V: v}}})
			want.Add(l, ts, v)
		}
		if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	h.AppendBatch(context.Background(), &Batch{Metadata: []Metadata{{Metric: "v", Type: "gauge", Help: "a value", Unit: "seconds"}}})
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	unaligned := h.counters.unaligned.Load()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	h2 := openHead(t, dir, func(o *Options) { o.ChunkRows = 16 })
	defer h2.Close()
	compareModels(t, want, readAll(t, h2, math.MinInt64, math.MaxInt64))
	if got := h2.counters.unaligned.Load(); got != unaligned || got != 1 {
		t.Fatalf("after replay %d unaligned members, before %d, want 1", got, unaligned)
	}
	md := h2.MetricMetadata("v", 0, 0)
	if len(md["v"]) != 1 || md["v"][0].Unit != "seconds" {
		t.Fatalf("metadata after replay: %v", md)
	}
	// Range trimming.
	got := readAll(t, h2, 100000, 199999)
	for k, ss := range got {
		for ts := range ss {
			if ts < 100000 || ts > 199999 {
				t.Fatalf("%s: %d outside range", k, ts)
			}
		}
	}
}

// TestHeadConcurrentShards appends from many goroutines like Prometheus's
// shards (series hashed onto shards) and checks every sample; run with -race.
func TestHeadConcurrentShards(t *testing.T) {
	dir := t.TempDir()
	h := openHead(t, dir, func(o *Options) { o.WALSyncInterval = 0 })
	const targets, perTarget, scrapes, shards = 8, 60, 60, 6
	var lsets []labels.Labels
	for tg := 0; tg < targets; tg++ {
		for m := 0; m < perTarget; m++ {
			lsets = append(lsets, series(fmt.Sprintf("node_metric_%d", m%12), "job", "node", "instance", fmt.Sprintf("host%d:9100", tg), "n", fmt.Sprint(m)))
		}
	}
	want := model{}
	for s := 0; s < scrapes; s++ {
		for i, l := range lsets {
			want.Add(l, int64(s)*15000, float64(s+i))
		}
	}
	var wg sync.WaitGroup
	for sh := 0; sh < shards; sh++ {
		wg.Add(1)
		go func(sh int) {
			defer wg.Done()
			for s := 0; s < scrapes; s++ {
				var b Batch
				for i, l := range lsets {
					if i%shards == sh {
						b.Series = append(b.Series, BatchSeries{Labels: l, Samples: []Sample{{T: int64(s) * 15000, V: float64(s + i)}}})
					}
				}
				if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
					t.Error(err, res.Err())
					return
				}
			}
		}(sh)
	}
	// Queries run while writes continue.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 20; i++ {
			q, _ := h.Querier(math.MinInt64, math.MaxInt64)
			ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "job", "node"))
			for ss.Next() {
				it := ss.At().Iterator(nil)
				for it.Next() != chunkenc.ValNone {
				}
			}
		}
	}()
	wg.Wait()
	<-done
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	h.Close()
	h2 := openHead(t, dir, nil)
	defer h2.Close()
	compareModels(t, want, readAll(t, h2, math.MinInt64, math.MaxInt64))
}

func TestHeadMatchers(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	var b Batch
	for i := 0; i < 30; i++ {
		kv := []string{"job", fmt.Sprintf("job%d", i%3), "instance", fmt.Sprintf("i%d", i)}
		if i%2 == 0 {
			kv = append(kv, "mode", fmt.Sprintf("mode%d", i%4))
		}
		b.Series = append(b.Series, BatchSeries{Labels: series(fmt.Sprintf("metric_%d", i%5), kv...), Samples: []Sample{{T: 1000, V: 1}}})
	}
	if _, err := h.AppendBatch(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	all := make([]labels.Labels, len(b.Series))
	for i := range b.Series {
		all[i] = b.Series[i].Labels
	}
	cases := [][]*labels.Matcher{
		{labels.MustNewMatcher(labels.MatchEqual, "job", "job1")},
		{labels.MustNewMatcher(labels.MatchNotEqual, "job", "job1")},
		{labels.MustNewMatcher(labels.MatchRegexp, "job", "job[12]")},
		{labels.MustNewMatcher(labels.MatchRegexp, "job", "job1|job2")},
		{labels.MustNewMatcher(labels.MatchNotRegexp, "mode", "mode0|mode2")},
		{labels.MustNewMatcher(labels.MatchEqual, "mode", "")},
		{labels.MustNewMatcher(labels.MatchNotEqual, "mode", "")},
		{labels.MustNewMatcher(labels.MatchRegexp, "mode", "mode0|")},
		{labels.MustNewMatcher(labels.MatchRegexp, "__name__", "metric_.*"), labels.MustNewMatcher(labels.MatchNotEqual, "instance", "i3")},
		{labels.MustNewMatcher(labels.MatchRegexp, "__name__", "metric_1"), labels.MustNewMatcher(labels.MatchRegexp, "job", "job.*")},
		{labels.MustNewMatcher(labels.MatchEqual, "nope", "x")},
		{labels.MustNewMatcher(labels.MatchRegexp, "instance", "i1.*"), labels.MustNewMatcher(labels.MatchNotRegexp, "job", "job0")},
	}
	for _, ms := range cases {
		var want []string
		for _, l := range all {
			ok := true
			for _, m := range ms {
				ok = ok && m.Matches(l.Get(m.Name))
			}
			if ok {
				want = append(want, l.String())
			}
		}
		sort.Strings(want)
		got := readAll(t, h, 0, 2000, ms...)
		var gotNames []string
		for k := range got {
			gotNames = append(gotNames, k)
		}
		sort.Strings(gotNames)
		if fmt.Sprint(want) != fmt.Sprint(gotNames) {
			t.Errorf("%v: got %v, want %v", ms, gotNames, want)
		}
	}
	q, _ := h.Querier(0, 2000)
	vals, _, _ := q.LabelValues(context.Background(), "job", nil, labels.MustNewMatcher(labels.MatchEqual, "mode", "mode2"))
	if fmt.Sprint(vals) != "[job0 job1 job2]" {
		t.Fatalf("label values: %v", vals)
	}
	names, _, _ := q.LabelNames(context.Background(), &storage.LabelHints{Limit: 2})
	if fmt.Sprint(names) != "[__name__ instance]" {
		t.Fatalf("label names with limit: %v", names)
	}
}

// TestHeadReplayOutOfOrderRecords: two requests for one series logged in the
// other order than applied must both survive replay.
func TestHeadReplayOutOfOrderRecords(t *testing.T) {
	dir := t.TempDir()
	h := openHead(t, dir, nil)
	l := series("x", "job", "j", "instance", "i")
	s, err := h.getOrCreate(l, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Log the newer sample's record first, as a concurrent request could.
	for _, smp := range []Sample{{T: 2000, V: 2}, {T: 1000, V: 1}} {
		var c record.Commit
		c.Series = []record.RefSeries{{Ref: s.ref, Labels: l}}
		c.Samples = []record.RefSample{{Ref: s.ref, T: smp.T, V: smp.V}}
		if err := h.wal.Log(c.Encode(nil)); err != nil {
			t.Fatal(err)
		}
	}
	h.Close()
	h2 := openHead(t, dir, nil)
	defer h2.Close()
	want := model{}
	want.Add(l, 1000, 1)
	want.Add(l, 2000, 2)
	compareModels(t, want, readAll(t, h2, math.MinInt64, math.MaxInt64))
	compareModels(t, model{l.String(): {2000: math.Float64bits(2)}}, readAll(t, h2, 1500, 3000))
}

func TestHeadDirectoryLock(t *testing.T) {
	dir := t.TempDir()
	h := openHead(t, dir, nil)
	if _, err := Open(dir, DefaultOptions()); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open of the same directory: %v", err)
	}
	h.Close()
	h2 := openHead(t, dir, nil)
	h2.Close()
}

func TestHeadSealIdle(t *testing.T) {
	now := int64(1 << 40)
	h := openHead(t, t.TempDir(), func(o *Options) { o.Now = func() int64 { return now } })
	defer h.Close()
	l := series("x", "job", "j", "instance", "i")
	l2 := series("y", "job", "j", "instance", "i")
	want := model{}
	for s := 0; s < 3; s++ {
		b := Batch{Series: []BatchSeries{{Labels: l, Samples: []Sample{{T: now + int64(s)*1000, V: float64(s)}}}, {Labels: l2, Samples: []Sample{{T: now + int64(s)*1000, V: 1}}}}}
		want.Add(l, now+int64(s)*1000, float64(s))
		want.Add(l2, now+int64(s)*1000, 1)
		if _, err := h.AppendBatch(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.SealIdle(); n != 0 {
		t.Fatalf("sealed %d rows of an active group", n)
	}
	now += 2 * time.Minute.Milliseconds()
	if n := h.SealIdle(); n != 3 {
		t.Fatalf("sealed %d rows of an idle group, want 3", n)
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	if n := h.counters.unaligned.Load(); n != 0 {
		t.Fatalf("%d unaligned after sealing", n)
	}
}

func TestChunksCutAtBlockBoundaries(t *testing.T) {
	h := openHead(t, t.TempDir(), func(o *Options) { o.BlockRange = time.Hour; o.ChunkRows = 1000 })
	defer h.Close()
	l := series("x", "job", "j", "instance", "i")
	l2 := series("y", "job", "j", "instance", "i")
	l3 := series("z", "job", "j", "instance", "i")
	want := model{}
	for s := 0; s < 1000; s++ { // 1000 × 15 s ≈ 4.2 h
		ts := int64(s) * 15000
		b := Batch{Series: []BatchSeries{{Labels: l, Samples: []Sample{{T: ts, V: float64(s)}}}, {Labels: l3, Samples: []Sample{{T: ts, V: 3}}}, {Labels: l2, Samples: []Sample{{T: ts + 1, V: 1}}}}}
		want.Add(l, ts, float64(s))
		want.Add(l3, ts, 3)
		want.Add(l2, ts+1, 1)
		if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	g := h.getOrCreateGroup(h.groupKey(l))
	check := func(tb *table) {
		if len(tb.chunks) < 4 {
			t.Fatalf("%d chunks for 4+ hours at 1h block range", len(tb.chunks))
		}
		for _, c := range tb.chunks {
			if c.minT/3600000 != c.maxT/3600000 {
				t.Fatalf("chunk [%d, %d] crosses a block boundary", c.minT, c.maxT)
			}
		}
	}
	check(g.aligned)
	s, _ := h.getOrCreate(l2, 0, nil)
	check(s.own())
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	if c := (chunkCut{blockRange: 100}); c.rangeEnd(-1) != 0 || c.rangeEnd(-100) != 0 || c.rangeEnd(0) != 100 || c.rangeEnd(99) != 100 {
		t.Fatal("rangeEnd wrong around zero")
	}
}

func TestHeadCheckpoint(t *testing.T) {
	dir := t.TempDir()
	opts := func(o *Options) { o.WALSegmentSize = 64 << 10 }
	h := openHead(t, dir, opts)
	want := model{}
	write := func(from, to int) {
		for s := from; s < to; s++ {
			var b Batch
			for m := 0; m < 20; m++ {
				l := series("cp", "job", "j", "instance", "i", "m", fmt.Sprint(m))
				b.Series = append(b.Series, BatchSeries{Labels: l, Samples: []Sample{{T: int64(s) * 1000, V: float64(s * m)}}})
				want.Add(l, int64(s)*1000, float64(s*m))
			}
			if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
				t.Fatal(err, res.Err())
			}
		}
	}
	write(0, 2000)
	h.AppendBatch(context.Background(), &Batch{Metadata: []Metadata{{Metric: "cp", Type: "gauge", Help: "h"}}})
	first, _, _ := h.wal.Segments()
	if err := h.Checkpoint(0); err != nil {
		t.Fatal(err)
	}
	write(2000, 2100)
	if f, _, _ := h.wal.Segments(); f <= first {
		t.Fatalf("segments from %d after checkpoint, before %d", f, first)
	}
	h.Close()
	h2 := openHead(t, dir, opts)
	compareModels(t, want, readAll(t, h2, math.MinInt64, math.MaxInt64))
	if md := h2.MetricMetadata("cp", 0, 0); len(md["cp"]) != 1 {
		t.Fatalf("metadata after checkpoint: %v", md)
	}
	// A second checkpoint that drops what went to blocks; replay honours MinValidTime.
	if err := h2.Checkpoint(1500 * 1000); err != nil {
		t.Fatal(err)
	}
	h2.Close()
	h3 := openHead(t, dir, func(o *Options) { opts(o); o.MinValidTime = 1500 * 1000 })
	defer h3.Close()
	w2 := model{}
	for k, ss := range want {
		for ts, v := range ss {
			if ts >= 1500*1000 {
				if w2[k] == nil {
					w2[k] = map[int64]uint64{}
				}
				w2[k][ts] = v
			}
		}
	}
	compareModels(t, w2, readAll(t, h3, math.MinInt64, math.MaxInt64))
	entries, _ := os.ReadDir(filepath.Join(dir, "wal"))
	cps := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "checkpoint.") {
			cps++
		}
	}
	if cps != 1 {
		t.Fatalf("%d checkpoints left, want 1", cps)
	}
	res, _ := h3.AppendBatch(context.Background(), &Batch{Series: []BatchSeries{{Labels: series("cp", "job", "j", "instance", "i", "m", "new"), Samples: []Sample{{T: 1000, V: 1}}}}})
	if !errors.Is(res.Err(), ErrTooOldSample) {
		t.Fatalf("sample before MinValidTime: %v", res.Err())
	}
}

func TestHeadTruncate(t *testing.T) {
	h := openHead(t, t.TempDir(), func(o *Options) { o.BlockRange = time.Hour })
	defer h.Close()
	want := model{}
	for s := 0; s < 600; s++ { // 2.5 h at 15 s
		var b Batch
		for m := 0; m < 5; m++ {
			l := series("tr", "job", "j", "instance", "i", "m", fmt.Sprint(m))
			ts := int64(s) * 15000
			if m == 4 {
				ts += 7 // unaligned member
			}
			b.Series = append(b.Series, BatchSeries{Labels: l, Samples: []Sample{{T: ts, V: float64(s)}}})
			if ts >= 3600000 {
				want.Add(l, ts, float64(s))
			}
		}
		if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	g := h.getOrCreateGroup(h.groupKey(series("tr", "job", "j", "instance", "i")))
	before := len(g.aligned.chunks)
	h.truncate(3600000)
	if after := len(g.aligned.chunks); after >= before {
		t.Fatalf("chunks %d → %d after truncation", before, after)
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	if st, _ := h.Stats("__name__", 10); st.MinTime != 3600000 {
		t.Fatalf("head min time %d after truncation", st.MinTime)
	}
}

// TestHeadHAFailover: two replicas of an HA pair write the same series; each
// group takes one replica, fails over after the timeout, and the result
// equals a single replica's in-order delivery: nothing lost, nothing doubled.
func TestHeadHAFailover(t *testing.T) {
	now := int64(1_000_000)
	h := openHead(t, t.TempDir(), func(o *Options) {
		o.Now = func() int64 { return now }
		o.HAFailoverTimeout = 30 * time.Second
	})
	defer h.Close()
	ls := func(replica, target string) labels.Labels {
		return labels.FromStrings("__name__", "up", "__replica__", replica, "cluster", "eu", "instance", target, "job", "node")
	}
	want := model{}
	stored := func(target string) labels.Labels {
		return labels.FromStrings("__name__", "up", "cluster", "eu", "instance", target, "job", "node")
	}
	send := func(replica string, ts int64, targets ...string) {
		// One request carrying both targets' series, as a sender would.
		var b Batch
		for _, tg := range targets {
			b.Series = append(b.Series, BatchSeries{Labels: ls(replica, tg), Samples: []Sample{{T: ts, V: float64(ts)}}})
		}
		res, err := h.AppendBatch(context.Background(), &b)
		if err != nil || res.Err() != nil || res.SamplesWritten != len(targets) {
			t.Fatalf("replica %s at %d: %v %v, %d written", replica, ts, err, res.Err(), res.SamplesWritten)
		}
	}
	// Both replicas scrape every 10 s, B 3 s after A. A is elected.
	for i := int64(0); i < 10; i++ {
		send("a", i*10000, "t1", "t2")
		send("b", i*10000+3000, "t1", "t2")
		want.Add(stored("t1"), i*10000, float64(i*10000))
		want.Add(stored("t2"), i*10000, float64(i*10000))
		now += 10000
	}
	// A stops; B goes on. After the failover timeout B takes over, from
	// after A's last sample on.
	for i := int64(10); i < 20; i++ {
		send("b", i*10000+3000, "t1", "t2")
		if now-(1_000_000+9*10000) > 30000 { // B elected once A (last seen at the 10th scrape) was silent 30 s
			want.Add(stored("t1"), i*10000+3000, float64(i*10000+3000))
			want.Add(stored("t2"), i*10000+3000, float64(i*10000+3000))
		}
		now += 10000
	}
	// A returns: B stays elected, A's samples are dropped.
	for i := int64(20); i < 25; i++ {
		send("a", i*10000, "t1")
		send("b", i*10000+3000, "t1", "t2")
		want.Add(stored("t1"), i*10000+3000, float64(i*10000+3000))
		want.Add(stored("t2"), i*10000+3000, float64(i*10000+3000))
		now += 10000
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	if h.counters.haDeduped.Load() == 0 {
		t.Fatal("nothing deduplicated")
	}
	if n := h.counters.groups.Load(); n != 2 {
		t.Fatalf("%d groups, want one per target and cluster (2)", n)
	}
}

// TestHeadHAPerGroup: one request carries both replicas' series; each group
// keeps the replica it elected.
func TestHeadHAPerGroup(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	l := func(replica, target string) labels.Labels {
		return labels.FromStrings("__name__", "up", "__replica__", replica, "cluster", "eu", "instance", target, "job", "node")
	}
	app := func(bs ...BatchSeries) {
		if res, err := h.AppendBatch(context.Background(), &Batch{Series: bs}); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	app(BatchSeries{Labels: l("b", "t3"), Samples: []Sample{{T: 1000, V: 1}}}) // t3 elects b
	app(BatchSeries{Labels: l("a", "t4"), Samples: []Sample{{T: 1000, V: 1}}}) // t4 elects a
	app(
		BatchSeries{Labels: l("a", "t3"), Samples: []Sample{{T: 2000, V: 100}}},
		BatchSeries{Labels: l("b", "t3"), Samples: []Sample{{T: 2001, V: 2}}},
		BatchSeries{Labels: l("a", "t4"), Samples: []Sample{{T: 2000, V: 2}}},
		BatchSeries{Labels: l("b", "t4"), Samples: []Sample{{T: 2001, V: 100}}},
	)
	want := model{}
	st := func(target string) labels.Labels {
		return labels.FromStrings("__name__", "up", "cluster", "eu", "instance", target, "job", "node")
	}
	want.Add(st("t3"), 1000, 1)
	want.Add(st("t3"), 2001, 2)
	want.Add(st("t4"), 1000, 1)
	want.Add(st("t4"), 2000, 2)
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
}

// TestHeadShuffledWithinWindow delivers a group's samples shuffled within
// the out-of-order window: the result equals in-order delivery, in the head
// and after a restart.
func TestHeadShuffledWithinWindow(t *testing.T) {
	dir := t.TempDir()
	mod := func(o *Options) { o.OutOfOrderWindow = 10 * time.Minute; o.ChunkRows = 32 }
	h := openHead(t, dir, mod)
	rng := rand.New(rand.NewSource(4))
	type item struct {
		l labels.Labels
		s Sample
	}
	var all []item
	want := model{}
	for sc := 0; sc < 600; sc++ {
		for m := 0; m < 8; m++ {
			l := series("shuf", "job", "j", "instance", "i", "m", fmt.Sprint(m))
			ts := int64(sc) * 15000
			v := float64(sc*m) + 0.5
			all = append(all, item{l, Sample{T: ts, V: v}})
			want.Add(l, ts, v)
		}
	}
	// Shuffle within windows of 20 scrapes (5 minutes), then deliver in batches.
	const w = 20 * 8
	for i := 0; i < len(all); i += w {
		end := min(i+w, len(all))
		rng.Shuffle(end-i, func(a, b int) { all[i+a], all[i+b] = all[i+b], all[i+a] })
	}
	for i := 0; i < len(all); i += 37 {
		var b Batch
		for _, it := range all[i:min(i+37, len(all))] {
			b.Series = append(b.Series, BatchSeries{Labels: it.l, Samples: []Sample{it.s}})
		}
		if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	h.Close()
	h2 := openHead(t, dir, mod)
	defer h2.Close()
	compareModels(t, want, readAll(t, h2, math.MinInt64, math.MaxInt64))
}

// TestHeadInferStaleness: with inference on, a member that stops appearing in
// its group's rows gets a staleness marker; off, nothing is added.
func TestHeadInferStaleness(t *testing.T) {
	for _, rows := range []int{0, 3} {
		h := openHead(t, t.TempDir(), func(o *Options) { o.InferStalenessRows = rows })
		var stopAt int64
		for s := 0; s < 40; s++ {
			var b Batch
			for m := 0; m < 4; m++ {
				if m == 3 && s >= 10 {
					continue // member 3 goes away without a staleness marker
				}
				b.Series = append(b.Series, BatchSeries{Labels: series("st", "job", "j", "instance", "i", "m", fmt.Sprint(m)), Samples: []Sample{{T: int64(s) * 15000, V: 1}}})
			}
			stopAt = 9 * 15000
			if _, err := h.AppendBatch(context.Background(), &b); err != nil {
				t.Fatal(err)
			}
		}
		got := readAll(t, h, math.MinInt64, math.MaxInt64)
		m3 := got[series("st", "job", "j", "instance", "i", "m", "3").String()]
		markers := 0
		for ts, v := range m3 {
			if value.IsStaleNaN(math.Float64frombits(v)) {
				markers++
				if want := stopAt + int64(rows)*15000; ts != want {
					t.Fatalf("marker at %d, want %d", ts, want)
				}
			}
		}
		if rows == 0 && markers != 0 || rows > 0 && markers != 1 {
			t.Fatalf("inference after %d rows wrote %d markers", rows, markers)
		}
		for m := 0; m < 3; m++ {
			for _, v := range got[series("st", "job", "j", "instance", "i", "m", fmt.Sprint(m)).String()] {
				if value.IsStaleNaN(math.Float64frombits(v)) {
					t.Fatalf("a present member was marked stale")
				}
			}
		}
		h.Close()
	}
}

func TestHeadExemplars(t *testing.T) {
	dir := t.TempDir()
	mod := func(o *Options) { o.MaxExemplars = 5 }
	h := openHead(t, dir, mod)
	l := series("http_requests_total", "job", "j", "instance", "i")
	ex := func(ts int64, trace string) Exemplar {
		return Exemplar{Labels: labels.FromStrings("trace_id", trace), T: ts, V: float64(ts) / 1000}
	}
	app := func(exs ...Exemplar) AppendResult {
		res, err := h.AppendBatch(context.Background(), &Batch{Series: []BatchSeries{{Labels: l, Samples: []Sample{{T: exs[len(exs)-1].T, V: 1}}, Exemplars: exs}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := app(ex(1000, "a"), ex(2000, "b")); res.ExemplarsWritten != 2 {
		t.Fatalf("%d exemplars written", res.ExemplarsWritten)
	}
	if res := app(ex(1000, "a"), ex(2000, "b")); res.ExemplarsWritten != 1 {
		// The resent newest one is accepted again; the older one is out of order.
		t.Fatalf("resend: %d exemplars written", res.ExemplarsWritten)
	}
	app(ex(3000, "c"), ex(4000, "d"), ex(5000, "e"), ex(6000, "f"))
	check := func(h *Head, want ...string) {
		t.Helper()
		var got []string
		h.Exemplars(0, 10000, func(ls labels.Labels) bool { return ls.Get("__name__") == "http_requests_total" },
			func(ls labels.Labels, es []exemplar.Exemplar) {
				if !labels.Equal(ls, l) {
					t.Fatalf("series %s", ls)
				}
				for _, e := range es {
					got = append(got, e.Labels.Get("trace_id"))
				}
			})
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("exemplars %v, want %v", got, want)
		}
	}
	check(h, "b", "c", "d", "e", "f") // capacity 5: the oldest is gone
	h.Close()
	h2 := openHead(t, dir, mod)
	check(h2, "b", "c", "d", "e", "f")
	if err := h2.Checkpoint(0); err != nil {
		t.Fatal(err)
	}
	h2.Close()
	h3 := openHead(t, dir, mod)
	defer h3.Close()
	check(h3, "b", "c", "d", "e", "f")
}

// TestCheckpointKeepsAlignment: a group's members replayed from a checkpoint
// share the group's timestamp column again instead of each storing its own.
func TestCheckpointKeepsAlignment(t *testing.T) {
	dir := t.TempDir()
	h := openHead(t, dir, nil)
	for s := 0; s < 600; s++ {
		var b Batch
		for m := 0; m < 30; m++ {
			l := series("al", "job", "j", "instance", "i", "m", fmt.Sprint(m))
			b.Series = append(b.Series, BatchSeries{Labels: l, Samples: []Sample{{T: int64(s) * 15000, V: float64(s * m)}}})
		}
		if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	if err := h.Checkpoint(0); err != nil {
		t.Fatal(err)
	}
	h.Close()
	h2 := openHead(t, dir, nil)
	defer h2.Close()
	own := 0
	h2.refs.each(func(s *memSeries) {
		s.g.mu.Lock()
		if s.own() != nil && (len(s.own().chunks) > 0 || s.own().building != nil) {
			own++
		}
		s.g.mu.Unlock()
	})
	if own > 0 {
		t.Errorf("%d of 30 members store their replayed samples on their own, not in the group's shared columns", own)
	}
}

// A row every aligned member filled is sealed as soon as a newer row exists;
// a row still missing a member stays open within the window, so a sample a
// racing shard delivers late joins the shared columns; and while a member
// joined within the window, rows wait for the window (more new members of
// the same scrape may be on their way).
func TestHeadSealsCompleteRows(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	x := series("x", "job", "j", "instance", "i")
	y := series("y", "job", "j", "instance", "i")
	z := series("z", "job", "j", "instance", "i")
	want := model{}
	app := func(l labels.Labels, ts int64) {
		t.Helper()
		b := Batch{Series: []BatchSeries{{Labels: l, Samples: []Sample{{T: ts * 1000, V: float64(ts)}}}}}
		if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
		want.Add(l, ts*1000, float64(ts))
	}
	expectOpen := func(secs ...int64) {
		t.Helper()
		var got []int64
		h.forEachGroup(func(g *group) {
			g.mu.Lock()
			for _, r := range g.aligned.open {
				got = append(got, r.t/1000)
			}
			g.mu.Unlock()
		})
		if !slices.Equal(got, secs) {
			t.Fatalf("open rows at %v s, want %v", got, secs)
		}
	}
	for ts := int64(0); ts <= 60; ts += 15 {
		app(x, ts)
		app(y, ts)
	}
	// x and y joined at 0: within the window (1 minute) of 60, so far
	// rows are sealed by the window alone.
	expectOpen(15, 30, 45, 60)
	app(x, 75)
	expectOpen(75)
	app(y, 75)
	app(x, 90)
	expectOpen(90)
	app(x, 105) // y's sample at 90 is late (another shard)
	expectOpen(90, 105)
	app(y, 90)
	expectOpen(105)
	app(y, 105)
	app(z, 105) // a new member
	app(x, 120)
	app(y, 120)
	app(z, 120)
	app(x, 135)
	expectOpen(105, 120, 135)
	if n := h.counters.unaligned.Load(); n != 0 {
		t.Fatalf("%d unaligned members, want 0", n)
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
}

// TestHeadConstantColumns reads columns of the chunk being built that are
// held without bytes while constant (encoding.XOREncoder.Constant), after
// every scrape, and again once frozen and after a replay: constant in every
// row, constant with gaps, constant until a later value, and constant special
// values whose bits must survive (-0, a NaN payload, the staleness marker).
func TestHeadConstantColumns(t *testing.T) {
	dir := t.TempDir()
	mod := func(o *Options) { o.ChunkRows = 16 }
	h := openHead(t, dir, mod)
	values := []func(s int) (float64, bool){
		func(s int) (float64, bool) { return 3.5, true },
		func(s int) (float64, bool) { return 42, s%5 != 2 },
		func(s int) (float64, bool) { return math.Copysign(0, -1), true },
		func(s int) (float64, bool) { return math.Float64frombits(0x7ff8000000000001), true },
		func(s int) (float64, bool) { return math.Float64frombits(value.StaleNaN), s%3 == 0 },
		func(s int) (float64, bool) { // changes from the ninth scrape of each chunk
			if s%16 < 8 {
				return 1, true
			}
			return float64(s), true
		},
		func(s int) (float64, bool) { return float64(s / 7), true }, // constant runs across chunk cuts
	}
	want := model{}
	for s := 0; s < 40; s++ {
		var b Batch
		ts := int64(s) * 15000
		for m, f := range values {
			v, ok := f(s)
			if !ok {
				continue
			}
			l := series("c", "job", "j", "instance", "i", "m", fmt.Sprint(m))
			b.Series = append(b.Series, BatchSeries{Labels: l, Samples: []Sample{{T: ts, V: v}}})
			want.Add(l, ts, v)
		}
		if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
		compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	}
	if n := h.counters.unaligned.Load(); n != 0 {
		t.Fatalf("%d members unaligned, want all aligned", n)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	h2 := openHead(t, dir, mod)
	defer h2.Close()
	compareModels(t, want, readAll(t, h2, math.MinInt64, math.MaxInt64))
}

// TestAppendBatchKeepsNoBatchLabels: a writer reuses its batch's memory once
// AppendBatch returns (remote's decoder packs a new series' labels into a
// reused arena), so the head copies whatever it keeps: the series' labels
// and the elected HA replica stay intact when that memory is rewritten.
func TestAppendBatchKeepsNoBatchLabels(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	sb := labels.NewScratchBuilder(4)
	// reused returns labels in sb's buffer: the next call rewrites them in place.
	reused := func(name, replica, instance string) labels.Labels {
		sb.Reset()
		sb.Add("__name__", name)
		sb.Add("__replica__", replica)
		sb.Add("instance", instance)
		var ls labels.Labels
		sb.Overwrite(&ls)
		return ls
	}
	send := func(ls labels.Labels, ts int64) int {
		b := Batch{Series: []BatchSeries{{Labels: ls, Samples: []Sample{{T: ts, V: 1}}}}}
		res, err := h.AppendBatch(context.Background(), &b)
		if err != nil {
			t.Fatal(err)
		}
		return res.SamplesWritten
	}
	if send(reused("m", "a", "x"), 1000) != 1 {
		t.Fatal("first sample refused")
	}
	// Same lengths: the buffer the first labels pointed to is rewritten.
	if send(reused("n", "b", "y"), 2000) != 1 {
		t.Fatal("another group's sample refused")
	}
	send(reused("m", "c", "x"), 3000) // accepted, but not stored: a is elected
	if n := h.counters.haDeduped.Load(); n != 1 {
		t.Fatalf("%d samples of a replica that is not elected, want 1", n)
	}
	if send(reused("m", "a", "x"), 4000) != 1 {
		t.Fatal("a sample of the elected replica a refused")
	}
	want := model{}
	want.Add(labels.FromStrings("__name__", "m", "instance", "x"), 1000, 1)
	want.Add(labels.FromStrings("__name__", "m", "instance", "x"), 4000, 1)
	want.Add(labels.FromStrings("__name__", "n", "instance", "y"), 2000, 1)
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
}

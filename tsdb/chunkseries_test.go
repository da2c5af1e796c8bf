package tsdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/tsdb/tsdbutil"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/tandem-tsdb/tandem/tsdb/head"
	"github.com/tandem-tsdb/tandem/tsdb/internal/results"
)

// csSample is a chunks.Sample of any value type, with an optional start timestamp.
type csSample struct {
	st, t int64
	f     float64
	h     *histogram.Histogram
	fh    *histogram.FloatHistogram
}

func (s csSample) T() int64                      { return s.t }
func (s csSample) ST() int64                     { return s.st }
func (s csSample) F() float64                    { return s.f }
func (s csSample) H() *histogram.Histogram       { return s.h }
func (s csSample) FH() *histogram.FloatHistogram { return s.fh }
func (s csSample) Copy() chunks.Sample           { return s }
func (s csSample) Type() chunkenc.ValueType {
	switch {
	case s.h != nil:
		return chunkenc.ValHistogram
	case s.fh != nil:
		return chunkenc.ValFloatHistogram
	}
	return chunkenc.ValFloat
}

// randomFloatSeries returns n float samples of kind counter, gauge, nan
// (NaNs of several payloads and stale markers among gauges) or bits (any
// 64-bit pattern), at irregular increasing timestamps.
func randomFloatSeries(rng *rand.Rand, kind string, n int) []chunks.Sample {
	out := make([]chunks.Sample, 0, n)
	t := rng.Int63n(1<<40) - 1<<39
	v := 0.0
	for i := 0; i < n; i++ {
		switch rng.Intn(10) {
		case 0:
			t += rng.Int63n(1 << 30) // a gap
		case 1:
			t++
		default:
			t += 15000 + rng.Int63n(3) - 1
		}
		switch kind {
		case "counter":
			if rng.Intn(500) == 0 {
				v = 0 // a reset
			}
			v += float64(rng.Intn(100))
		case "gauge":
			v = math.Round(rng.NormFloat64()*1e4) / 100
		case "nan":
			switch rng.Intn(6) {
			case 0:
				v = math.NaN()
			case 1:
				v = math.Float64frombits(value.StaleNaN)
			case 2:
				v = math.Float64frombits(0x7ff0000000000000 | rng.Uint64()&0x000fffffffffffff | 1)
			default:
				v = rng.NormFloat64()
			}
		case "bits":
			v = math.Float64frombits(rng.Uint64())
		}
		out = append(out, csSample{t: t, f: v})
	}
	return out
}

func histogramSeries(kind string, n int) []chunks.Sample {
	out := make([]chunks.Sample, 0, n)
	for i := 0; i < n; i++ {
		t := int64(i) * 1000
		switch kind {
		case "histogram":
			j := i
			if i >= n/2 {
				j = i - n/2 // a counter reset: Prometheus's appender cuts a chunk
			}
			out = append(out, csSample{t: t, h: tsdbutil.GenerateTestHistogram(int64(j))})
		case "gauge-histogram":
			out = append(out, csSample{t: t, h: tsdbutil.GenerateTestGaugeHistogram(int64(i % 17))})
		case "float-histogram":
			out = append(out, csSample{t: t, fh: tsdbutil.GenerateTestFloatHistogram(int64(i))})
		case "mixed":
			switch (i / 50) % 3 {
			case 0:
				out = append(out, csSample{t: t, f: float64(i)})
			case 1:
				out = append(out, csSample{t: t, h: tsdbutil.GenerateTestHistogram(int64(i))})
			case 2:
				out = append(out, csSample{t: t, fh: tsdbutil.GenerateTestFloatHistogram(int64(i))})
			}
		case "start-timestamps":
			s := csSample{t: t, f: float64(i)}
			if i >= n/3 {
				s.st = t - 500 // XOR cannot hold it: cut to XOR2
			}
			out = append(out, s)
		}
	}
	return out
}

// decodeChunks returns the float samples of chks; it fails on other types.
func decodeChunks(t *testing.T, chks []chunks.Meta) []csSample {
	t.Helper()
	var out []csSample
	var it chunkenc.Iterator
	for _, m := range chks {
		n := 0
		it = m.Chunk.Iterator(it)
		for typ := it.Next(); typ != chunkenc.ValNone; typ = it.Next() {
			if typ != chunkenc.ValFloat {
				t.Fatalf("unexpected %s sample", typ)
			}
			ts, v := it.At()
			if ts < m.MinTime || ts > m.MaxTime {
				t.Fatalf("sample at %d outside chunk [%d, %d]", ts, m.MinTime, m.MaxTime)
			}
			out = append(out, csSample{st: it.AtST(), t: ts, f: v})
			n++
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		if n == 0 || n > chunkSeriesSplit || n != m.Chunk.NumSamples() {
			t.Fatalf("chunk of %d samples (NumSamples %d)", n, m.Chunk.NumSamples())
		}
	}
	return out
}

// sameChunks fails unless got and want are the same chunks, byte for byte.
func sameChunks(t *testing.T, got, want []chunks.Meta) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d chunks, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.MinTime != w.MinTime || g.MaxTime != w.MaxTime || g.Chunk.Encoding() != w.Chunk.Encoding() || !bytes.Equal(g.Chunk.Bytes(), w.Chunk.Bytes()) {
			t.Fatalf("chunk %d: [%d, %d] %s %d bytes, want [%d, %d] %s %d bytes", i,
				g.MinTime, g.MaxTime, g.Chunk.Encoding(), len(g.Chunk.Bytes()),
				w.MinTime, w.MaxTime, w.Chunk.Encoding(), len(w.Chunk.Bytes()))
		}
	}
}

// expandKeeping iterates it to the end like storage.ExpandChunks, but also
// checks that no chunk yielded earlier changes while later ones are encoded.
func expandKeeping(t *testing.T, it chunks.Iterator) []chunks.Meta {
	t.Helper()
	var out []chunks.Meta
	var copies [][]byte
	for it.Next() {
		m := it.At()
		if m.Chunk == nil {
			t.Fatal("chunk not populated")
		}
		out = append(out, m)
		copies = append(copies, bytes.Clone(m.Chunk.Bytes()))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if it.Next() {
		t.Fatal("Next after the end returned true")
	}
	for i, m := range out {
		if !bytes.Equal(m.Chunk.Bytes(), copies[i]) {
			t.Fatalf("chunk %d changed after it was yielded", i)
		}
	}
	return out
}

// TestLazyChunksMatchEncoder encodes random float series (counters, gauges,
// NaNs and stale markers, any bit pattern, empty and around the 120-sample
// boundary) and histogram series: the lazy chunks must be exactly those of
// Prometheus's storage.NewSeriesToChunkEncoder, and the float ones must
// decode to exactly the series' samples.
func TestLazyChunksMatchEncoder(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	lset := labels.FromStrings("__name__", "x")
	var reused chunks.Iterator
	check := func(t *testing.T, in []chunks.Sample) {
		s := storage.NewListSeries(lset, in)
		want, err := storage.ExpandChunks(storage.NewSeriesToChunkEncoder(s).Iterator(nil))
		if err != nil {
			t.Fatal(err)
		}
		cs := &chunkSeries{Series: s}
		fresh := expandKeeping(t, cs.Iterator(nil))
		sameChunks(t, fresh, want)
		// The iterator of the previous series passed back: reused.
		it := cs.Iterator(reused)
		if reused != nil && it != reused {
			t.Fatal("iterator not reused")
		}
		reused = it
		sameChunks(t, expandKeeping(t, it), want)
		got, err := storage.ExpandChunks(cs.Iterator(nil))
		if err != nil {
			t.Fatal(err)
		}
		sameChunks(t, got, want)
		for _, s := range in {
			if s.Type() != chunkenc.ValFloat {
				return // histograms: the bytes compared suffice
			}
		}
		dec := decodeChunks(t, fresh)
		if len(dec) != len(in) {
			t.Fatalf("%d samples decoded, want %d", len(dec), len(in))
		}
		for i, s := range in {
			if dec[i].t != s.T() || math.Float64bits(dec[i].f) != math.Float64bits(s.F()) || dec[i].st != s.ST() {
				t.Fatalf("sample %d: (%d, %d, %x), want (%d, %d, %x)", i,
					dec[i].st, dec[i].t, math.Float64bits(dec[i].f), s.ST(), s.T(), math.Float64bits(s.F()))
			}
		}
	}
	for _, kind := range []string{"counter", "gauge", "nan", "bits"} {
		for _, n := range []int{0, 1, 2, 119, 120, 121, 239, 240, 241, 1000, rng.Intn(5000)} {
			t.Run(fmt.Sprintf("%s/%d", kind, n), func(t *testing.T) {
				check(t, randomFloatSeries(rng, kind, n))
			})
		}
	}
	for _, kind := range []string{"histogram", "gauge-histogram", "float-histogram", "mixed", "start-timestamps"} {
		for _, n := range []int{1, 120, 121, 400} {
			t.Run(fmt.Sprintf("%s/%d", kind, n), func(t *testing.T) {
				check(t, histogramSeries(kind, n))
			})
		}
	}
}

// errAfter is a series whose iterator fails after n samples.
type errAfter struct {
	storage.Series
	n int
}

var errInjected = errors.New("injected read error")

func (s errAfter) Iterator(it chunkenc.Iterator) chunkenc.Iterator {
	return &errIterator{Iterator: s.Series.Iterator(it), left: s.n}
}

type errIterator struct {
	chunkenc.Iterator
	left int
	err  error
}

func (it *errIterator) Next() chunkenc.ValueType {
	if it.left == 0 {
		it.err = errInjected
		return chunkenc.ValNone
	}
	it.left--
	return it.Iterator.Next()
}

func (it *errIterator) Err() error { return it.err }

// TestLazyChunksContract checks the storage.ChunkSeriesSet and
// chunks.Iterator contracts: errors of the sample iterator and of the set,
// labels and warnings, reuse after partial iteration, At after the end.
func TestLazyChunksContract(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	a := storage.NewListSeries(labels.FromStrings("__name__", "a"), randomFloatSeries(rng, "gauge", 500))
	b := storage.NewListSeries(labels.FromStrings("__name__", "b"), randomFloatSeries(rng, "counter", 130))

	t.Run("sample iterator error", func(t *testing.T) {
		it := (&chunkSeries{Series: errAfter{Series: a, n: 250}}).Iterator(nil)
		n := 0
		for it.Next() {
			n++
		}
		// The two full chunks before the error are yielded, the partial one is not.
		if n != 2 || !errors.Is(it.Err(), errInjected) {
			t.Fatalf("%d chunks, err %v; want 2, %v", n, it.Err(), errInjected)
		}
		if it.Next() || !errors.Is(it.Err(), errInjected) {
			t.Fatal("iteration resumed after an error")
		}
		if _, err := storage.ExpandChunks((&chunkSeries{Series: errAfter{Series: a, n: 10}}).Iterator(nil)); !errors.Is(err, errInjected) {
			t.Fatalf("ExpandChunks: %v", err)
		}
		// A reused iterator forgets the error.
		it = (&chunkSeries{Series: b}).Iterator(it)
		if chks, err := storage.ExpandChunks(it); err != nil || len(chks) != 2 {
			t.Fatalf("after reuse: %d chunks, %v", len(chks), err)
		}
	})

	t.Run("reuse after partial iteration", func(t *testing.T) {
		want, _ := storage.ExpandChunks(storage.NewSeriesToChunkEncoder(b).Iterator(nil))
		it := (&chunkSeries{Series: a}).Iterator(nil)
		it.Next()
		it.Next()
		it = (&chunkSeries{Series: b}).Iterator(it)
		sameChunks(t, expandKeeping(t, it), want)
		if m := it.At(); m.Chunk != nil {
			t.Fatal("At after the end returns a chunk")
		}
	})

	t.Run("set", func(t *testing.T) {
		var warn annotations.Annotations
		warn.Add(errors.New("a warning"))
		ss := newChunkSeriesSet(results.NewList([]storage.Series{a, b}, warn))
		var names []string
		var it chunks.Iterator
		for ss.Next() {
			s := ss.At()
			names = append(names, s.Labels().Get("__name__"))
			it = s.Iterator(it)
			got, err := storage.ExpandChunks(it)
			if err != nil || len(got) == 0 {
				t.Fatalf("%v: %d chunks, %v", s.Labels(), len(got), err)
			}
		}
		if ss.Err() != nil || fmt.Sprint(names) != "[a b]" || len(ss.Warnings()) != 1 {
			t.Fatalf("series %v, err %v, warnings %v", names, ss.Err(), ss.Warnings())
		}
		es := newChunkSeriesSet(storage.ErrSeriesSet(errInjected))
		if es.Next() || !errors.Is(es.Err(), errInjected) {
			t.Fatalf("error set: err %v", es.Err())
		}
		if es := newChunkSeriesSet(storage.EmptySeriesSet()); es.Next() || es.Err() != nil {
			t.Fatal("empty set")
		}
	})
}

// TestChunkQuerierLazy reads a DB's blocks and head (counters, gauges, NaNs,
// sender and inferred stale markers, a series that ends early) through
// ChunkQuerier of the DB and of the head: the chunks must decode to exactly
// what the sample querier returns and be those Prometheus's encoder makes.
func TestChunkQuerierLazy(t *testing.T) {
	db := openDB(t, t.TempDir(), func(o *DBOptions) { o.Head.BlockRange = time.Hour })
	defer db.Close()
	rng := rand.New(rand.NewSource(11))
	const scrapes = 1500 // 6h15m at 15 s
	var b head.Batch
	for i := 0; i < scrapes; i++ {
		b.Reset()
		ts := int64(i) * 15000
		for m := 0; m < 6; m++ {
			l := series("metric", "job", "j", "instance", "i", "m", fmt.Sprint(m))
			var v float64
			switch m {
			case 0:
				v = float64(i * 3)
			case 1:
				v = rng.NormFloat64()
			case 2:
				v = math.Float64frombits(rng.Uint64())
			case 3:
				if i%97 == 0 {
					v = math.Float64frombits(value.StaleNaN)
				} else if i%13 == 0 {
					v = math.NaN()
				} else {
					v = float64(i % 50)
				}
			case 4:
				if i > 700 {
					continue // stops: a stale marker is inferred
				}
				v = 1
			case 5:
				if i%2 == 1 {
					continue // every other scrape only
				}
				v = float64(-i)
			}
			b.Series = append(b.Series, head.BatchSeries{Labels: l, Samples: []head.Sample{{T: ts, V: v}}})
		}
		if res, err := db.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	if len(db.Blocks()) == 0 {
		t.Fatal("no blocks")
	}
	all := labels.MustNewMatcher(labels.MatchEqual, "__name__", "metric")
	for _, rg := range [][2]int64{{math.MinInt64, math.MaxInt64}, {1234567, 19_000_000}, {0, 0}, {-10, -1}} {
		for _, src := range []struct {
			name string
			q    func(mint, maxt int64) (storage.Querier, error)
			cq   func(mint, maxt int64) (storage.ChunkQuerier, error)
		}{{"db", db.Querier, db.ChunkQuerier}, {"head", db.head.Querier, func(mint, maxt int64) (storage.ChunkQuerier, error) {
			q, err := db.head.Querier(mint, maxt)
			return &mergedChunkQuerier{q}, err
		}}} {
			t.Run(fmt.Sprintf("%s/%d-%d", src.name, rg[0], rg[1]), func(t *testing.T) {
				q, err := src.q(rg[0], rg[1])
				if err != nil {
					t.Fatal(err)
				}
				defer q.Close()
				cq, err := src.cq(rg[0], rg[1])
				if err != nil {
					t.Fatal(err)
				}
				defer cq.Close()
				ss := q.Select(context.Background(), true, nil, all)
				cs := cq.Select(context.Background(), true, nil, all)
				var (
					sit    chunkenc.Iterator
					cit    chunks.Iterator
					series int
				)
				for cs.Next() {
					if !ss.Next() {
						t.Fatal("more chunk series than series")
					}
					s, c := ss.At(), cs.At()
					if labels.Compare(s.Labels(), c.Labels()) != 0 {
						t.Fatalf("series %v, chunk series %v", s.Labels(), c.Labels())
					}
					want, err := storage.ExpandChunks(storage.NewSeriesToChunkEncoder(s).Iterator(nil))
					if err != nil {
						t.Fatal(err)
					}
					cit = c.Iterator(cit)
					got := expandKeeping(t, cit)
					sameChunks(t, got, want)
					dec := decodeChunks(t, got)
					sit = s.Iterator(sit)
					i := 0
					for sit.Next() == chunkenc.ValFloat {
						ts, v := sit.At()
						if i >= len(dec) || dec[i].t != ts || math.Float64bits(dec[i].f) != math.Float64bits(v) {
							t.Fatalf("%v sample %d: got %+v, want (%d, %x)", s.Labels(), i, dec[min(i, len(dec)-1)], ts, math.Float64bits(v))
						}
						i++
					}
					if i != len(dec) {
						t.Fatalf("%v: %d samples decoded, %d read", s.Labels(), len(dec), i)
					}
					series++
				}
				if ss.Next() {
					t.Fatal("more series than chunk series")
				}
				if ss.Err() != nil || cs.Err() != nil {
					t.Fatal(ss.Err(), cs.Err())
				}
				if rg[0] == math.MinInt64 && src.name == "db" && series != 6 {
					t.Fatalf("%d series, want 6", series)
				}
			})
		}
	}
}

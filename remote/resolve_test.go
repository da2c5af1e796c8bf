package remote

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb"
)

// TestKnownSeriesFastPath writes the same series repeatedly through the real
// head: later requests resolve series by label hash instead of rebuilding
// labels, and every sample must land on the right series.
func TestKnownSeriesFastPath(t *testing.T) {
	opts := tsdb.DefaultOptions()
	opts.WALSyncInterval = 0
	h, err := tsdb.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(NewWriteHandler(h, WriteHandlerOptions{}))
	defer srv.Close()

	names := []string{"a", "b", "c"}
	for round := int64(0); round < 5; round++ {
		req := &prompb.WriteRequest{}
		for i, n := range names {
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
				Labels:  []prompb.Label{{Name: "__name__", Value: n}, {Name: "instance", Value: "x"}, {Name: "job", Value: "j"}},
				Samples: []prompb.Sample{{Timestamp: 1000 * (round + 1), Value: float64(100*i) + float64(round)}},
			})
		}
		raw, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(srv.URL, "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, raw)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("round %d: status %d", round, resp.StatusCode)
		}
	}
	q, _ := h.Querier(math.MinInt64, math.MaxInt64)
	defer q.Close()
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, "job", "j"))
	n := 0
	for ss.Next() {
		s := ss.At()
		i := map[string]int{"a": 0, "b": 1, "c": 2}[s.Labels().Get("__name__")]
		it := s.Iterator(nil)
		round := 0
		for it.Next() == chunkenc.ValFloat {
			ts, v := it.At()
			if ts != int64(1000*(round+1)) || v != float64(100*i+round) {
				t.Fatalf("%s: sample %d is (%d, %v)", s.Labels(), round, ts, v)
			}
			round++
		}
		if round != 5 {
			t.Fatalf("%s: %d samples, want 5", s.Labels(), round)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("%d series, want 3", n)
	}
	// Decoding the series again resolves them to references, except an unknown one.
	req := &prompb.WriteRequest{}
	for _, n := range []string{"b", "zzz"} {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
			Labels:  []prompb.Label{{Name: "__name__", Value: n}, {Name: "instance", Value: "x"}, {Name: "job", Value: "j"}},
			Samples: []prompb.Sample{{Timestamp: 99000, Value: 1}},
		})
	}
	raw, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	d := newDecoder(Limits{})
	d.resolver = h
	b, err := d.decodeV1(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Series) != 2 || b.Series[0].Ref.ID == 0 || !b.Series[0].Labels.IsEmpty() || b.Series[1].Ref.ID != 0 || b.Series[1].RawHash == 0 {
		t.Fatalf("known series not resolved, or unknown one resolved: %+v", b.Series)
	}
	// A hash hit whose labels differ (a collision) must not resolve.
	if _, ok := h.ResolveRaw(1, func(labels.Labels) bool { return false }); ok {
		t.Fatal("resolved despite a label mismatch")
	}
}

// gcBeforeAppend is the real DB with GC of every idle group run between a
// request's decoding and its append, once armed: the race in which a series
// resolved from the decoder's cache has just left the head.
type gcBeforeAppend struct {
	*tsdb.DB
	armed bool
}

func (g *gcBeforeAppend) AppendBatch(ctx context.Context, b *tsdb.Batch) (tsdb.AppendResult, error) {
	if g.armed {
		g.armed = false
		if err := g.DB.Flush(true); err != nil {
			return tsdb.AppendResult{}, err
		}
		if groups, _ := g.DB.Head().GC(math.MaxInt64); groups == 0 {
			panic("GC removed nothing: the test no longer exercises the race")
		}
	}
	return g.DB.AppendBatch(ctx, b)
}

// TestSeriesGoneBetweenDecodeAndAppend: the request still succeeds, its
// series are created again by labels, and no sample is lost.
func TestSeriesGoneBetweenDecodeAndAppend(t *testing.T) {
	opts := tsdb.DBOptions{Head: tsdb.DefaultOptions()}
	opts.Head.WALSyncInterval = 0
	opts.Head.Now = func() int64 { return 1 << 50 }
	db, err := tsdb.OpenDB(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	app := &gcBeforeAppend{DB: db}
	srv := testServer(t, app, DefaultLimits(), nil)
	send := func(ts int64) {
		t.Helper()
		req := &prompb.WriteRequest{}
		for i, n := range []string{"a", "b"} {
			req.Timeseries = append(req.Timeseries, v1Series([]string{"__name__", n, "instance", "x", "job", "j"}, prompb.Sample{Timestamp: ts, Value: float64(i)}))
		}
		expectStatus(t, postV1(t, srv.URL, req), http.StatusNoContent)
	}
	send(1000)
	app.armed = true
	const later = 3 * 3600 * 1000 // a block range after the flushed one
	send(later)
	if app.armed {
		t.Fatal("the second request did not reach the appender")
	}
	q, err := db.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, "job", "j"))
	n := 0
	for ss.Next() {
		var ts []int64
		it := ss.At().Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			t, _ := it.At()
			ts = append(ts, t)
		}
		if len(ts) != 2 || ts[0] != 1000 || ts[1] != later {
			t.Errorf("%s: timestamps %v, want [1000 %d]", ss.At().Labels(), ts, later)
		}
		n++
	}
	if n != 2 {
		t.Fatalf("%d series, want 2", n)
	}
}

// TestKnownSeriesFastPathV2 is TestKnownSeriesFastPath for remote write 2.0:
// a known series resolves to its reference,
// an unknown one and one whose labels only share the hash do not, and every
// sample lands on its series.
func TestKnownSeriesFastPathV2(t *testing.T) {
	opts := tsdb.DefaultOptions()
	opts.WALSyncInterval = 0
	h, err := tsdb.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := testServer(t, h, DefaultLimits(), nil)
	names := []string{"a", "b", "c"}
	for round := int64(0); round < 5; round++ {
		bld := newV2Builder()
		for i, n := range names {
			bld.add([]string{"__name__", n, "instance", "x", "job", "j"}, writev2.Sample{Timestamp: 1000 * (round + 1), Value: float64(100*i) + float64(round)})
		}
		expectStatus(t, postV2(t, srv.URL, bld.build()), http.StatusNoContent)
	}
	q, _ := h.Querier(math.MinInt64, math.MaxInt64)
	defer q.Close()
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, "job", "j"))
	n := 0
	for ss.Next() {
		s := ss.At()
		i := map[string]int{"a": 0, "b": 1, "c": 2}[s.Labels().Get("__name__")]
		it := s.Iterator(nil)
		round := 0
		for it.Next() == chunkenc.ValFloat {
			ts, v := it.At()
			if ts != int64(1000*(round+1)) || v != float64(100*i+round) {
				t.Fatalf("%s: sample %d is (%d, %v)", s.Labels(), round, ts, v)
			}
			round++
		}
		if round != 5 {
			t.Fatalf("%s: %d samples, want 5", s.Labels(), round)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("%d series, want 3", n)
	}
	bld := newV2Builder()
	for _, n := range []string{"b", "zzz"} {
		bld.add([]string{"__name__", n, "instance", "x", "job", "j"}, writev2.Sample{Timestamp: 99000, Value: 1})
	}
	raw, err := bld.build().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	d := newDecoder(Limits{})
	d.resolver = h
	b, err := d.decodeV2(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Series) != 2 || b.Series[0].Ref.ID == 0 || !b.Series[0].Labels.IsEmpty() || b.Series[1].Ref.ID != 0 || b.Series[1].RawHash == 0 {
		t.Fatalf("known series not resolved, or unknown one resolved: %+v", b.Series)
	}
	// The same labels with one value changed never match, whatever the hash says.
	d.v2cur = v2Labels{refs: []uint32{1, 2, 3, 4, 5, 6}, syms: []string{"", "__name__", "b", "instance", "y", "job", "j"}}
	if d.matchV2Labels(labels.FromStrings("__name__", "b", "instance", "x", "job", "j")) {
		t.Fatal("matched labels that differ in a value")
	}
	if !d.matchV2Labels(labels.FromStrings("__name__", "b", "instance", "y", "job", "j")) {
		t.Fatal("did not match equal labels")
	}
}

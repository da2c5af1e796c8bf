package remote

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/tsdbutil"

	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// expectBody fails the test unless r's body contains every want.
func expectBody(t *testing.T, r result, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(r.body, w) {
			t.Errorf("body %q does not contain %q", r.body, w)
		}
	}
}

// expectHistograms checks the histograms the appender received for a series against want.
func expectHistograms(t *testing.T, app *recordingAppender, series string, want ...pbHistogram) {
	t.Helper()
	got := app.histograms()[series]
	if len(got) != len(want) {
		t.Fatalf("series %s: %d histograms written, want %d", series, len(got), len(want))
	}
	for i := range want {
		w := converted(want[i])
		if d := histogramDiff(&got[i], &w); d != "" {
			t.Errorf("series %s histogram %d: %s", series, i, d)
		}
	}
}

// TestWriteV2Histograms: integer and float histograms reach the Appender as
// Prometheus converts them, counted in the written header; the exemplars of
// a series holding only histograms are kept.
func TestWriteV2Histograms(t *testing.T) {
	reg := prometheus.NewRegistry()
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{}, reg)
	b := newV2Builder()
	b.add([]string{"__name__", "up", "job", "x"}, writev2.Sample{Timestamp: 1, Value: 1}, writev2.Sample{Timestamp: 2, Value: 1})
	h := b.add([]string{"__name__", "latency_seconds", "job", "x"})
	h.Histograms = []writev2.Histogram{
		writev2.FromIntHistogram(0, 1, tsdbutil.GenerateTestHistogram(1)),
		writev2.FromFloatHistogram(0, 2, tsdbutil.GenerateTestFloatHistogram(2)),
		writev2.FromIntHistogram(0, 3, tsdbutil.GenerateTestCustomBucketsHistogram(3)),
	}
	h.Exemplars = []writev2.Exemplar{{LabelsRefs: b.refs([]string{"trace_id", "h"}), Value: 0.2, Timestamp: 2}}
	e := b.add([]string{"__name__", "req_total", "job", "x"}, writev2.Sample{Timestamp: 1, Value: 10})
	e.Exemplars = []writev2.Exemplar{{LabelsRefs: b.refs([]string{"trace_id", "abc"}), Value: 10, Timestamp: 1}}
	req := b.build()

	r := postV2(t, srv.URL, req)
	expectStatus(t, r, http.StatusNoContent)
	expectWritten(t, r, "3", "3", "2")
	expectHistograms(t, app, `{__name__="latency_seconds", job="x"}`, &req.Timeseries[1].Histograms[0], &req.Timeseries[1].Histograms[1], &req.Timeseries[1].Histograms[2])
	if n := app.samples(); n != 3 {
		t.Errorf("%d samples written, want 3", n)
	}
	if n := app.exemplars(); n != 2 {
		t.Errorf("%d exemplars reached the storage, want 2 (one of a series of histograms only)", n)
	}
	if v := counterValue(t, reg, "tandem_remote_write_histograms_received_total", versionLabelV2); v != 3 {
		t.Errorf("histograms received = %v, want 3", v)
	}
	// Exported at 0 from the start; histograms are no longer counted there.
	if n, err := testutil.GatherAndCount(reg, "tandem_remote_write_dropped_total"); err != nil || n != 1 {
		t.Errorf("dropped_total series = %d, %v; want 1 (reason=exemplar)", n, err)
	}
}

// TestWriteV1Histograms: 1.0 histograms (custom buckets included: 1.0
// carries custom_values too) reach the Appender, and so do the exemplars of
// a series holding only histograms.
func TestWriteV1Histograms(t *testing.T) {
	reg := prometheus.NewRegistry()
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{}, reg)
	s := v1Series([]string{"__name__", "up", "job", "x"}, prompb.Sample{Timestamp: 1, Value: 1})
	h := v1Series([]string{"__name__", "lat", "job", "x"})
	h.Histograms = []prompb.Histogram{
		prompb.FromFloatHistogram(1, tsdbutil.GenerateTestGaugeFloatHistogram(1)),
		prompb.FromIntHistogram(2, tsdbutil.GenerateTestCustomBucketsHistogram(2)),
	}
	h.Exemplars = []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "a"}}, Value: 1, Timestamp: 1}}
	r := postV1(t, srv.URL, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{s, h}})
	expectStatus(t, r, http.StatusNoContent)
	expectNoWritten(t, r)
	expectHistograms(t, app, `{__name__="lat", job="x"}`, &h.Histograms[0], &h.Histograms[1])
	if n := app.exemplars(); n != 1 {
		t.Errorf("%d exemplars reached the storage, want 1", n)
	}
	if v := counterValue(t, reg, "tandem_remote_write_histograms_received_total", versionLabelV1); v != 2 {
		t.Errorf("histograms received = %v, want 2", v)
	}
}

// TestWriteInvalidHistogram: a histogram Prometheus would refuse is refused
// with a reason naming its series; the rest of the request is written.
func TestWriteInvalidHistogram(t *testing.T) {
	reg := prometheus.NewRegistry()
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{}, reg)
	good := writev2.FromIntHistogram(0, 1, tsdbutil.GenerateTestHistogram(1))
	bad := good
	bad.Timestamp = 2
	bad.PositiveDeltas = bad.PositiveDeltas[:1] // fewer buckets than its spans
	b := newV2Builder()
	b.add([]string{"__name__", "up", "job", "x"}, writev2.Sample{Timestamp: 1, Value: 1})
	b.add([]string{"__name__", "lat", "job", "x"}).Histograms = []writev2.Histogram{good, bad}
	r := postV2(t, srv.URL, b.build())
	expectStatus(t, r, http.StatusBadRequest)
	expectWritten(t, r, "1", "1", "0")
	expectBody(t, r, "partial write: 1 of 1 samples written, 1 of 2 histograms, 0 of 0 exemplars",
		`1 samples rejected: invalid native histogram (e.g. series {__name__="lat", job="x"} at 2: positive side: spans need 4 buckets, have 1 buckets: histogram spans specify different number of buckets than provided)`)
	expectHistograms(t, app, `{__name__="lat", job="x"}`, &good)
	if v := counterValue(t, reg, "tandem_remote_write_samples_rejected_total", "invalid_histogram"); v != 1 {
		t.Errorf("rejected{invalid_histogram} = %v, want 1", v)
	}

	// 1.0 the same, and an invalid series' histograms count as invalid labels.
	h := v1Series([]string{"__name__", "lat", "job", "y"})
	h.Histograms = []prompb.Histogram{v1Histogram(good), v1Histogram(bad)}
	e := v1Series([]string{"__name__", "lat", "job", ""})
	e.Histograms = []prompb.Histogram{v1Histogram(good), v1Histogram(bad)}
	r = postV1(t, srv.URL, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{h, e}})
	expectStatus(t, r, http.StatusBadRequest)
	expectBody(t, r, "0 of 0 samples written, 1 of 4 histograms",
		`1 samples rejected: invalid native histogram (e.g. series {__name__="lat", job="y"} at 2: positive side`,
		`2 samples rejected: invalid labels (e.g. series {__name__="lat", job=""}: empty value for label "job")`)
	expectHistograms(t, app, `{__name__="lat", job="y"}`, &good)
}

// TestWriteHistogramLimits: a histogram over MaxBucketsPerHistogram is
// refused alone (400); a request whose histograms would take more than
// MaxHistogramBytesPerRequest is refused whole (413).
func TestWriteHistogramLimits(t *testing.T) {
	app := &recordingAppender{}
	h := writev2.FromIntHistogram(0, 1, tsdbutil.GenerateTestHistogram(1)) // 2+2 spans, 4+4 buckets: 12
	srv := testServer(t, app, Limits{MaxBucketsPerHistogram: 11}, nil)
	b := newV2Builder()
	b.add([]string{"__name__", "up"}, writev2.Sample{Timestamp: 1, Value: 1})
	b.add([]string{"__name__", "lat"}).Histograms = []writev2.Histogram{h}
	r := postV2(t, srv.URL, b.build())
	expectStatus(t, r, http.StatusBadRequest)
	expectWritten(t, r, "1", "0", "0")
	expectBody(t, r, `invalid native histogram (e.g. series {__name__="lat"} at 1: 12 spans, buckets and custom bounds, more than the limit of 11 (max-buckets-per-histogram))`)

	srv = testServer(t, app, Limits{MaxBucketsPerHistogram: 12}, nil)
	expectStatus(t, postV2(t, srv.URL, b.build()), http.StatusNoContent)

	// Three such histograms take 3*(histHeaderBytes+12*8) bytes (864 on 64-bit).
	need := 3 * (histHeaderBytes + 12*8)
	b = newV2Builder()
	b.add([]string{"__name__", "up"}, writev2.Sample{Timestamp: 1, Value: 1})
	b.add([]string{"__name__", "lat"}).Histograms = []writev2.Histogram{h, h, h}
	srv = testServer(t, app, Limits{MaxHistogramBytesPerRequest: need - 1}, nil)
	r = postV2(t, srv.URL, b.build())
	expectStatus(t, r, http.StatusRequestEntityTooLarge)
	expectWritten(t, r, "0", "0", "0")
	expectBody(t, r, "max-histogram-bytes-per-request")
	srv = testServer(t, app, Limits{MaxHistogramBytesPerRequest: need}, nil)
	expectStatus(t, postV2(t, srv.URL, b.build()), http.StatusNoContent)
}

// TestWriteHistogramsRealHead sends histograms to the real head: every
// sample and histogram is written, the headers count them, and the head
// holds them afterwards.
func TestWriteHistogramsRealHead(t *testing.T) {
	opts := head.DefaultOptions()
	opts.WALSyncInterval = 0
	hd, err := head.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer hd.Close()
	srv := testServer(t, hd, Limits{}, nil)
	now := time.Now().UnixMilli()
	b := newV2Builder()
	b.add([]string{"__name__", "up", "job", "x"}, writev2.Sample{Timestamp: now, Value: 1})
	b.add([]string{"__name__", "lat", "job", "x"}, writev2.Sample{Timestamp: now - 1, Value: 1}).Histograms =
		[]writev2.Histogram{writev2.FromIntHistogram(0, now, tsdbutil.GenerateTestHistogram(1))}
	b.add([]string{"__name__", "only_histograms", "job", "x"}).Histograms =
		[]writev2.Histogram{writev2.FromFloatHistogram(0, now, tsdbutil.GenerateTestFloatHistogram(1))}
	r := postV2(t, srv.URL, b.build())
	expectStatus(t, r, http.StatusNoContent)
	expectWritten(t, r, "2", "2", "0")
	q, err := hd.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, "job", "x"))
	kinds := map[string][]chunkenc.ValueType{}
	for ss.Next() {
		it := ss.At().Iterator(nil)
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			kinds[ss.At().Labels().Get("__name__")] = append(kinds[ss.At().Labels().Get("__name__")], vt)
		}
	}
	want := map[string][]chunkenc.ValueType{
		"up":              {chunkenc.ValFloat},
		"lat":             {chunkenc.ValFloat, chunkenc.ValHistogram},
		"only_histograms": {chunkenc.ValFloatHistogram},
	}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("the head holds %v, want %v", kinds, want)
	}
}

// TestKnownSeriesHistograms: a series the head already holds keeps its
// histograms and exemplars on the decoder's fast path (resolved by
// reference, no labels built), in both versions.
func TestKnownSeriesHistograms(t *testing.T) {
	opts := head.DefaultOptions()
	opts.WALSyncInterval = 0
	hd, err := head.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer hd.Close()
	srv := testServer(t, hd, Limits{}, nil)
	now := time.Now().UnixMilli()
	pairs := []string{"__name__", "lat", "job", "x"}
	expectStatus(t, postV1(t, srv.URL, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		v1Series(pairs, prompb.Sample{Timestamp: now, Value: 1})}}), http.StatusNoContent)

	hist := tsdbutil.GenerateTestHistogram(4)
	ts := v1Series(pairs)
	ts.Histograms = []prompb.Histogram{prompb.FromIntHistogram(now+1, hist)}
	ts.Exemplars = []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "a"}}, Timestamp: now + 1}}
	b := newV2Builder()
	s2 := b.add(pairs)
	s2.Histograms = []writev2.Histogram{writev2.FromIntHistogram(0, now+1, hist)}
	s2.Exemplars = []writev2.Exemplar{{LabelsRefs: b.refs([]string{"trace_id", "a"}), Timestamp: now + 1}}
	for _, tc := range []struct {
		name   string
		raw    []byte
		decode func(*decoder, []byte) (*head.Batch, error)
	}{
		{"1.0", marshal(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts}}), (*decoder).decodeV1},
		{"2.0", marshal(t, b.build()), (*decoder).decodeV2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecoder(Limits{})
			d.resolver = hd
			batch, err := tc.decode(d, tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			if len(batch.Series) != 1 {
				t.Fatalf("%d series in the batch", len(batch.Series))
			}
			s := batch.Series[0]
			if s.Ref.ID == 0 || !s.Labels.IsEmpty() {
				t.Errorf("series not resolved: ref %d, labels %s", s.Ref.ID, s.Labels)
			}
			want := head.HistogramSample{T: now + 1, H: hist}
			if len(s.Histograms) != 1 || histogramDiff(&s.Histograms[0], &want) != "" || len(s.Exemplars) != 1 {
				t.Errorf("histograms %+v, exemplars %+v", s.Histograms, s.Exemplars)
			}
		})
	}
}

// TestHistogramMemoryHandedOver: the histograms of one request do not share
// memory with the next request's (the Appender keeps the pointers), while
// the decoder's batch and arenas are reused.
func TestHistogramMemoryHandedOver(t *testing.T) {
	d := newDecoder(Limits{})
	b := newV2Builder()
	b.add([]string{"__name__", "lat"}).Histograms = []writev2.Histogram{writev2.FromIntHistogram(0, 1, tsdbutil.GenerateTestHistogram(1))}
	raw := marshal(t, b.build())
	first, err := d.decodeV2(raw)
	if err != nil {
		t.Fatal(err)
	}
	kept := first.Series[0].Histograms[0]
	want := head.HistogramSample{T: 1, H: tsdbutil.GenerateTestHistogram(1)}
	d.release()
	b = newV2Builder()
	h2 := tsdbutil.GenerateTestHistogram(9)
	b.add([]string{"__name__", "lat"}).Histograms = []writev2.Histogram{writev2.FromIntHistogram(0, 2, h2)}
	second, err := d.decodeV2(marshal(t, b.build()))
	if err != nil {
		t.Fatal(err)
	}
	if second.Series[0].Histograms[0].H == kept.H {
		t.Error("the second request reused the first one's histogram")
	}
	if diff := histogramDiff(&kept, &want); diff != "" {
		t.Errorf("the first request's histogram changed: %s", diff)
	}
	if kept.H.CounterResetHint != histogram.UnknownCounterReset {
		t.Errorf("reset hint %d", kept.H.CounterResetHint)
	}
}

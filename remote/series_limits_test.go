package remote

import (
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// TestSeriesLimitAnswers400: a request creating more series of a metric than
// the head's max_series_per_metric allows is answered 400 naming the limit,
// its value and the metric, while the request's other series are written;
// series that exist keep being written afterwards (204).
func TestSeriesLimitAnswers400(t *testing.T) {
	pairs := func(name, inst string) []string { return []string{"__name__", name, "instance", inst, "job", "j"} }
	for _, proto := range []struct {
		name   string
		encode func(t *testing.T, ts int64, instances []string) (string, []byte)
	}{
		{"1.0", func(t *testing.T, ts int64, instances []string) (string, []byte) {
			req := &prompb.WriteRequest{}
			for _, in := range instances {
				req.Timeseries = append(req.Timeseries, v1Series(pairs("foo", in), prompb.Sample{Timestamp: ts, Value: 1}))
			}
			req.Timeseries = append(req.Timeseries, v1Series(pairs("bar", "x"), prompb.Sample{Timestamp: ts, Value: 2}))
			return ctV1, marshal(t, req)
		}},
		{"2.0", func(t *testing.T, ts int64, instances []string) (string, []byte) {
			bld := newV2Builder()
			for _, in := range instances {
				bld.add(pairs("foo", in), writev2.Sample{Timestamp: ts, Value: 1})
			}
			bld.add(pairs("bar", "x"), writev2.Sample{Timestamp: ts, Value: 2})
			return ctV2, marshal(t, bld.build())
		}},
	} {
		t.Run(proto.name, func(t *testing.T) {
			opts := head.DefaultOptions()
			opts.WALSyncInterval = 0
			opts.Limits = head.SeriesLimits{MaxSeriesPerMetric: 2}
			h, err := head.Open(t.TempDir(), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			reg := prometheus.NewRegistry()
			srv := testServer(t, h, DefaultLimits(), reg)

			ct, raw := proto.encode(t, 1000, []string{"a", "b", "c", "d"})
			r := post(t, srv.URL, ct, "snappy", snappy.Encode(nil, raw))
			expectStatus(t, r, http.StatusBadRequest)
			for _, want := range []string{"3 of 5 samples written", "2 samples rejected", `per-tenant limit max_series_per_metric (2) reached for metric "foo"`} {
				if !strings.Contains(r.body, want) {
					t.Errorf("body lacks %q:\n%s", want, r.body)
				}
			}
			if ct == ctV2 {
				expectWritten(t, r, "3", "0", "0")
			}
			if got := rejectedSamples(t, reg, "series_per_metric_limit"); got != 2 {
				t.Errorf("samples rejected for series_per_metric_limit = %v, want 2", got)
			}

			// The series that exist keep taking samples.
			ct, raw = proto.encode(t, 2000, []string{"a", "b"})
			expectStatus(t, post(t, srv.URL, ct, "snappy", snappy.Encode(nil, raw)), http.StatusNoContent)

			q, err := h.Querier(math.MinInt64, math.MaxInt64)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			got := map[string]int{}
			set := q.Select(t.Context(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "job", "j"))
			for set.Next() {
				it := set.At().Iterator(nil)
				for it.Next() != 0 {
					got[set.At().Labels().Get("__name__")+"/"+set.At().Labels().Get("instance")]++
				}
			}
			if err := set.Err(); err != nil {
				t.Fatal(err)
			}
			want := map[string]int{"foo/a": 2, "foo/b": 2, "bar/x": 2}
			if len(got) != len(want) {
				t.Fatalf("stored %v, want %v", got, want)
			}
			for k, n := range want {
				if got[k] != n {
					t.Fatalf("stored %v, want %v", got, want)
				}
			}
		})
	}
}

// rejectedSamples returns tandem_remote_write_samples_rejected_total{reason} gathered from reg.
func rejectedSamples(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tandem_remote_write_samples_rejected_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "reason" && lp.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no tandem_remote_write_samples_rejected_total{reason=%q}", reason)
	return 0
}

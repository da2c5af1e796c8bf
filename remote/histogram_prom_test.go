package remote

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	promremote "github.com/prometheus/prometheus/storage/remote"
	promtsdb "github.com/prometheus/prometheus/tsdb"
)

// TestHistogramValidationMatchesPrometheus sends every histogram case, one
// request each, to Prometheus's own receiver over its TSDB: it must store
// exactly the cases tandem's decoder accepts (histogramCase.valid, which
// TestHistogramDecodeMatchesPrometheus holds the decoder to), in both
// protocol versions.
func TestHistogramValidationMatchesPrometheus(t *testing.T) {
	db, err := promtsdb.Open(t.TempDir(), nil, nil, promtsdb.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srv := httptest.NewServer(promremote.NewWriteHandler(slog.New(slog.DiscardHandler), nil, db,
		remoteapi.MessageTypes{remoteapi.WriteV1MessageType, remoteapi.WriteV2MessageType}, false, false))
	defer srv.Close()

	now := time.Now().UnixMilli()
	for i, c := range histogramCases() {
		c.h.Timestamp = now // within the TSDB's window; each case has series of its own
		b := newV2Builder()
		b.add(append(caseLabels(i), "version", "2")).Histograms = []writev2.Histogram{c.h}
		r := postV2(t, srv.URL, b.build())
		stored := r.status == http.StatusNoContent && r.header.Get(HeaderHistogramsWritten) == "1"
		if !stored && r.status != http.StatusBadRequest {
			t.Errorf("%s: 2.0: Prometheus answered %d %q", c.name, r.status, r.body)
		}
		if stored != c.valid {
			t.Errorf("%s: 2.0: Prometheus stores it: %v, tandem: %v (%d %q)", c.name, stored, c.valid, r.status, r.body)
		}

		ts := v1Series(append(caseLabels(i), "version", "1"))
		ts.Histograms = []prompb.Histogram{v1Histogram(c.h)}
		r = postV1(t, srv.URL, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts}})
		if stored := r.status == http.StatusNoContent; stored != c.valid {
			t.Errorf("%s: 1.0: Prometheus stores it: %v, tandem: %v (%d %q)", c.name, stored, c.valid, r.status, r.body)
		}
	}
}

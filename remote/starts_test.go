package remote

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/tsdbutil"

	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// TestWriteStartTimestampsRealHead sends remote write 2.0 samples and
// histograms with start_timestamp (and series without, before and after
// them) to a real head and reads every sample's start timestamp back.
func TestWriteStartTimestampsRealHead(t *testing.T) {
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
	b.add([]string{"__name__", "before", "job", "x"}, writev2.Sample{Timestamp: now, Value: 1})
	b.add([]string{"__name__", "counter", "job", "x"},
		writev2.Sample{Timestamp: now - 2000, Value: 1},
		writev2.Sample{Timestamp: now - 1000, Value: 2, StartTimestamp: now - 5000},
		writev2.Sample{Timestamp: now, Value: 3, StartTimestamp: now - 5000})
	b.add([]string{"__name__", "after", "job", "x"}, writev2.Sample{Timestamp: now, Value: 1})
	b.add([]string{"__name__", "lat", "job", "x"}).Histograms = []writev2.Histogram{
		writev2.FromIntHistogram(now-100, now-1000, tsdbutil.GenerateTestHistogram(1)),
		writev2.FromFloatHistogram(0, now, tsdbutil.GenerateTestFloatHistogram(2)),
	}
	r := postV2(t, srv.URL, b.build())
	expectStatus(t, r, http.StatusNoContent)
	expectWritten(t, r, "5", "2", "0")

	want := map[string][][2]int64{
		"before":  {{now, 0}},
		"counter": {{now - 2000, 0}, {now - 1000, now - 5000}, {now, now - 5000}},
		"after":   {{now, 0}},
		"lat":     {{now - 1000, now - 100}, {now, 0}},
	}
	q, err := hd.Querier(0, now+1)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "job", "x"))
	got := map[string][][2]int64{}
	for ss.Next() {
		it := ss.At().Iterator(nil)
		name := ss.At().Labels().Get("__name__")
		for it.Next() != chunkenc.ValNone {
			got[name] = append(got[name], [2]int64{it.AtT(), it.AtST()})
		}
	}
	for name, w := range want {
		if len(got[name]) != len(w) {
			t.Fatalf("%s: read %v, want %v", name, got[name], w)
		}
		for i := range w {
			if got[name][i] != w[i] {
				t.Errorf("%s: sample %d (t, st) = %v, want %v", name, i, got[name][i], w[i])
			}
		}
	}
}

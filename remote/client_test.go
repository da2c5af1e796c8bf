package remote

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// newClient returns the client_golang remote-write client aimed at srv with fast, bounded retries.
func newClient(t *testing.T, url string, client *http.Client) *remoteapi.API {
	t.Helper()
	api, err := remoteapi.NewAPI(url,
		remoteapi.WithAPIHTTPClient(client),
		remoteapi.WithAPIBackoff(remoteapi.BackoffConfig{Min: time.Millisecond, Max: time.Millisecond, MaxRetries: 2}))
	if err != nil {
		t.Fatal(err)
	}
	return api
}

func TestClientV1(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{}, nil)
	api := newClient(t, srv.URL, srv.Client())
	req := nodeRequestV1(t, 300, 1_700_000_000_000)
	req.Metadata = []prompb.MetricMetadata{{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "node_cpu_seconds_total", Help: "Seconds the CPUs spent in each mode."}}
	if _, err := api.Write(context.Background(), remoteapi.WriteV1MessageType, req); err != nil {
		t.Fatalf("1.0 write: %v", err)
	}
	got := app.series()
	if len(got) != 300 {
		t.Fatalf("%d series arrived, want 300", len(got))
	}
	sb := labels.NewScratchBuilder(0)
	for _, ts := range req.Timeseries {
		ls := ts.ToLabels(&sb, nil)
		ss := got[ls.String()]
		if len(ss) != 1 || ss[0] != (head.Sample{T: ts.Samples[0].Timestamp, V: ts.Samples[0].Value}) {
			t.Fatalf("series %s arrived as %v", ls, ss)
		}
	}
	if m := app.metadata()["node_cpu_seconds_total"]; m.Type != "counter" || m.Help == "" {
		t.Errorf("metadata = %+v", m)
	}
}

func TestClientV2(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{}, nil)
	api := newClient(t, srv.URL, srv.Client())
	req := nodeRequestV2(t, 300, 1_700_000_000_000)
	stats, err := api.Write(context.Background(), remoteapi.WriteV2MessageType, req)
	if err != nil {
		t.Fatalf("2.0 write: %v", err)
	}
	if stats.Samples != 300 || stats.Histograms != 0 || stats.Exemplars != 0 {
		t.Errorf("client parsed stats %+v, want 300 samples", stats)
	}
	if n := app.samples(); n != 300 {
		t.Errorf("%d samples arrived, want 300", n)
	}
	md := app.metadata()
	if m := md["node_cpu_seconds_total"]; m.Type != "counter" || !strings.Contains(m.Help, "CPU") {
		t.Errorf("metadata = %+v", m)
	}
}

// TestClientV2PartialWrite: the client sees the 400 without retrying and reads the accurate counts.
func TestClientV2PartialWrite(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{}, nil)
	api := newClient(t, srv.URL, srv.Client())
	b := newV2Builder()
	b.add([]string{"__name__", "up", "job", "x"}, writev2.Sample{Timestamp: 1, Value: 1})
	h := b.add([]string{"__name__", "lat", "job", "x"})
	h.Histograms = []writev2.Histogram{
		{Count: &writev2.Histogram_CountInt{CountInt: 1}, ZeroCount: &writev2.Histogram_ZeroCountInt{ZeroCountInt: 1}, Timestamp: 1},
		{Count: &writev2.Histogram_CountInt{CountInt: 1}, Timestamp: 2}, // 1 observation, none in its buckets: invalid
	}
	retries := 0
	stats, err := api.Write(context.Background(), remoteapi.WriteV2MessageType, b.build(),
		remoteapi.WithWriteRetryCallback(func(error) { retries++ }))
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "invalid native histogram") {
		t.Fatalf("err = %v, want a 400 naming the invalid histogram", err)
	}
	if retries != 0 {
		t.Errorf("client retried a 400 %d times", retries)
	}
	if stats.Samples != 1 || stats.Histograms != 1 {
		t.Errorf("client parsed stats %+v, want 1 sample, 1 histogram", stats)
	}
}

// TestClientRetries5xx: a storage failure is a 500, which the client retries.
func TestClientRetries5xx(t *testing.T) {
	app := &recordingAppender{err: errors.New("head is closing")}
	srv := testServer(t, app, Limits{}, nil)
	api := newClient(t, srv.URL, srv.Client())
	retries := 0
	_, err := api.Write(context.Background(), remoteapi.WriteV2MessageType, nodeRequestV2(t, 3, 1),
		remoteapi.WithWriteRetryCallback(func(error) { retries++ }))
	if err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("err = %v, want 500", err)
	}
	if retries != 2 {
		t.Errorf("client retried %d times, want 2", retries)
	}
}

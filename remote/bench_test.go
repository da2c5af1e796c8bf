package remote

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	promremote "github.com/prometheus/prometheus/storage/remote"
	promtsdb "github.com/prometheus/prometheus/tsdb"

	"github.com/tandem-tsdb/tandem/tsdb/head"
	"github.com/tandem-tsdb/tandem/workload"
)

// benchRequests returns node_exporter-like requests, pre-encoded, in the
// order a Prometheus queue manager would interleave its shards.
func benchRequests(b *testing.B, version int) ([]workload.Encoded, int) {
	b.Helper()
	scrapes, err := workload.Generate(workload.Options{Targets: 20, Scrapes: 40, Seed: 7, Histogram: true,
		Start: time.Now().Add(-40 * 15 * time.Second)})
	if err != nil {
		b.Fatal(err)
	}
	opts := workload.SendOptions{Version: version, Shards: 8, MaxSamplesPerSend: 2000, Lockstep: true}
	reqs, err := workload.BuildRequests(scrapes, opts)
	if err != nil {
		b.Fatal(err)
	}
	enc, err := workload.EncodeAll(reqs)
	if err != nil {
		b.Fatal(err)
	}
	var out []workload.Encoded
	samples := 0
	for i := 0; ; i++ {
		more := false
		for _, shard := range enc {
			if i < len(shard) {
				out = append(out, shard[i])
				samples += shard[i].Samples
				more = true
			}
		}
		if !more {
			break
		}
	}
	return out, samples
}

// BenchmarkRemoteWrite measures a whole remote-write request (snappy, decode,
// validation, append, WAL) through tandem's handler and head, next to
// Prometheus's own receiver (storage/remote write handler over its tsdb) in
// the same run, on the same pre-encoded requests.
func BenchmarkRemoteWrite(b *testing.B) {
	for _, version := range []int{1, 2} {
		reqs, samples := benchRequests(b, version)
		name := map[int]string{1: "v1", 2: "v2"}[version]
		run := func(b *testing.B, newHandler func(dir string) (http.Handler, func())) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				h, closeFn := newHandler(b.TempDir())
				b.StartTimer()
				for _, r := range reqs {
					req := httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(r.Body))
					req.Header.Set("Content-Type", r.ContentType)
					req.Header.Set("Content-Encoding", "snappy")
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code/100 != 2 {
						b.Fatalf("status %d: %s", rec.Code, rec.Body.String())
					}
				}
				b.StopTimer()
				closeFn()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*samples), "ns/sample")
		}
		b.Run("tandem-"+name, func(b *testing.B) {
			run(b, func(dir string) (http.Handler, func()) {
				opts := head.DefaultOptions()
				opts.WALSyncInterval = time.Second
				h, err := head.Open(dir, opts)
				if err != nil {
					b.Fatal(err)
				}
				return NewWriteHandler(h, WriteHandlerOptions{}), func() { h.Close() }
			})
		})
		b.Run("prometheus-"+name, func(b *testing.B) {
			run(b, func(dir string) (http.Handler, func()) {
				opts := promtsdb.DefaultOptions()
				db, err := promtsdb.Open(dir, nil, nil, opts, nil)
				if err != nil {
					b.Fatal(err)
				}
				h := promremote.NewWriteHandler(nil, nil, db, remoteapi.MessageTypes{remoteapi.WriteV1MessageType, remoteapi.WriteV2MessageType}, false, false)
				return h, func() { db.Close() }
			})
		})
	}
	_ = context.Background
}

package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gogo/protobuf/proto"
	"github.com/golang/snappy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/prompb"

	"github.com/tandem-tsdb/tandem/remote"
	"github.com/tandem-tsdb/tandem/rules"
	"github.com/tandem-tsdb/tandem/workload"
)

// tenantBody is one pre-encoded remote-write request of a tenant.
type tenantBody struct {
	tenant  string
	body    []byte
	samples int
}

// encodeTenantShards builds the requests of the given targets' scrapes, as
// one Prometheus with `shards` shards sends them, for tenant.
func encodeTenantShards(b *testing.B, scrapes []workload.Scrape, tenant string, shards int) [][]tenantBody {
	reqs, err := workload.BuildRequests(scrapes, workload.SendOptions{Version: 1, Shards: shards, MaxSamplesPerSend: 2000})
	if err != nil {
		b.Fatal(err)
	}
	out := make([][]tenantBody, len(reqs))
	for sh, rs := range reqs {
		for _, r := range rs {
			raw, err := proto.Marshal(r.V1)
			if err != nil {
				b.Fatal(err)
			}
			out[sh] = append(out[sh], tenantBody{tenant: tenant, body: snappy.Encode(nil, raw), samples: r.Samples})
		}
	}
	return out
}

// BenchmarkTenantIngest measures what tenancy costs on the write path: the
// same targets sent by several Prometheus servers (senders), each with
// 8/senders shards, once all to the default tenant (tenants=1) and once
// each to a tenant of its own: the requests are the same, only where they
// go differs. The handler is tandem's own (tenant resolution, per-tenant
// storages, WAL), called in process so that no client cost is counted.
func BenchmarkTenantIngest(b *testing.B) {
	const targets, scrapes, shards = 20, 30, 8
	all, err := workload.Generate(workload.Options{
		Targets: targets, Scrapes: scrapes, Seed: 3,
		Start: time.Now().Add(-scrapes * 15 * time.Second).Truncate(time.Second),
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ senders, tenants int }{{4, 1}, {4, 4}, {20, 1}, {20, 20}} {
		nt := c.tenants
		b.Run(fmt.Sprintf("senders=%d/tenants=%d", c.senders, nt), func(b *testing.B) {
			var streams [][]tenantBody
			for i := range c.senders {
				var mine []workload.Scrape
				for _, s := range all {
					if s.Target%c.senders == i {
						mine = append(mine, s)
					}
				}
				tn := fmt.Sprintf("team-%d", i)
				if nt == 1 {
					tn = "" // the default tenant, as without tenancy
				}
				streams = append(streams, encodeTenantShards(b, mine, tn, max(shards/c.senders, 1))...)
			}
			total := 0
			for _, st := range streams {
				for _, r := range st {
					total += r.samples
				}
			}
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				c, err := parseFlags([]string{"--storage.path=" + b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				logger := slog.New(slog.DiscardHandler)
				reg := prometheus.NewRegistry()
				ext, _ := externalURL("http://127.0.0.1:9201/", c.listenAddress)
				ts, err := openTenants(c, headOptions(c), logger, reg, ext, func(*rules.Service) {})
				if err != nil {
					b.Fatal(err)
				}
				for i := range nt { // opening a tenant is BenchmarkTenantOpen's
					if _, err := ts.reg.Open(fmt.Sprintf("team-%d", i)); nt > 1 && err != nil {
						b.Fatal(err)
					}
				}
				wh := remote.NewTenantWriteHandler(ts, remote.WriteHandlerOptions{Logger: logger, Registerer: reg})
				// One write per tenant first: a tenant's first write creates its
				// first WAL segment, a cost of opening it, not of ingesting.
				for i := range nt {
					warmup := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
						Labels:  []prompb.Label{{Name: "__name__", Value: "warmup"}},
						Samples: []prompb.Sample{{Timestamp: all[0].T, Value: 1}},
					}}}
					raw, _ := proto.Marshal(warmup)
					req := httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(snappy.Encode(nil, raw)))
					req.Header.Set("Content-Type", "application/x-protobuf")
					if nt > 1 {
						req.Header.Set("X-Scope-OrgID", fmt.Sprintf("team-%d", i))
					}
					w := httptest.NewRecorder()
					if wh.ServeHTTP(w, req); w.Code != http.StatusNoContent {
						b.Fatalf("warm-up write: %d %s", w.Code, w.Body)
					}
				}
				b.StartTimer()
				var wg sync.WaitGroup
				for _, st := range streams {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for _, r := range st {
							req := httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(r.body))
							req.Header.Set("Content-Type", "application/x-protobuf")
							req.Header.Set("Content-Encoding", "snappy")
							if r.tenant != "" {
								req.Header.Set("X-Scope-OrgID", r.tenant)
							}
							w := httptest.NewRecorder()
							wh.ServeHTTP(w, req)
							if w.Code != http.StatusNoContent {
								b.Errorf("write: %d %s", w.Code, w.Body)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				if err := ts.reg.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(total), "ns/sample")
		})
	}
}

// BenchmarkTenantOpen measures what a new tenant costs: opening its
// storage (created on its first write) and the API over it.
func BenchmarkTenantOpen(b *testing.B) {
	c, err := parseFlags([]string{"--storage.path=" + b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	ext, _ := externalURL("http://127.0.0.1:9201/", c.listenAddress)
	ts, err := openTenants(c, headOptions(c), slog.New(slog.DiscardHandler), prometheus.NewRegistry(), ext, func(*rules.Service) {})
	if err != nil {
		b.Fatal(err)
	}
	defer ts.reg.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := ts.reg.Open(fmt.Sprintf("t-%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "heap-B/tenant")
}

package main

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"testing"
	"time"

	config_util "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage"
	promremote "github.com/prometheus/prometheus/storage/remote"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/workload"
)

// TestRemoteRead reads data back with Prometheus's own remote-read client,
// in both response types, and compares it with what was written, across
// blocks and head.
func TestRemoteRead(t *testing.T) {
	const targets, nScrapes = 3, 60
	start := time.Now().Add(-nScrapes * 15 * time.Second).Truncate(time.Second)
	scrapes, err := workload.Generate(workload.Options{Targets: targets, Scrapes: nScrapes, Start: start, Seed: 5, Histogram: true})
	if err != nil {
		t.Fatal(err)
	}
	p := startTandem(t, t.TempDir(), "--storage.block-range=2m", "--head.maintenance-interval=50ms")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := workload.Send(ctx, p.url+"/api/v1/write", 1, scrapes, 2, 2000); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); blocksCoverage(t, p) < 4*120000; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no blocks flushed")
		}
	}
	want := map[string]map[int64]float64{}
	for _, sc := range scrapes {
		for _, s := range sc.Samples {
			if s.Labels.Get("__name__") != "node_cpu_seconds_total" {
				continue
			}
			k := s.Labels.String()
			if want[k] == nil {
				want[k] = map[int64]float64{}
			}
			want[k][sc.T] = s.V
		}
	}
	u, _ := url.Parse(p.url + "/api/v1/read")
	for _, rt := range []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS, prompb.ReadRequest_SAMPLES} {
		t.Run(rt.String(), func(t *testing.T) {
			c, err := promremote.NewReadClient("tandem", &promremote.ClientConfig{
				URL: &config_util.URL{URL: u}, Timeout: model.Duration(30 * time.Second),
				AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{rt}, ChunkedReadLimit: 50 << 20,
			})
			if err != nil {
				t.Fatal(err)
			}
			q, err := promremote.ToQuery(scrapes[0].T, scrapes[len(scrapes)-1].T, []*labels.Matcher{
				labels.MustNewMatcher(labels.MatchEqual, "__name__", "node_cpu_seconds_total"),
			}, &storage.SelectHints{Start: scrapes[0].T, End: scrapes[len(scrapes)-1].T})
			if err != nil {
				t.Fatal(err)
			}
			ss, err := c.Read(ctx, q, true)
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			var it chunkenc.Iterator
			for ss.Next() {
				s := ss.At()
				w := want[s.Labels().String()]
				if w == nil {
					t.Fatalf("unexpected series %s", s.Labels())
				}
				n := 0
				it = s.Iterator(it)
				for it.Next() == chunkenc.ValFloat {
					ts, v := it.At()
					if wv, ok := w[ts]; !ok || math.Float64bits(wv) != math.Float64bits(v) {
						t.Fatalf("%s at %d: got %v, want %v (present %v)", s.Labels(), ts, v, wv, ok)
					}
					n++
				}
				if n != len(w) {
					t.Fatalf("%s: %d samples, want %d", s.Labels(), n, len(w))
				}
				got++
			}
			if err := ss.Err(); err != nil {
				t.Fatal(err)
			}
			if got != len(want) {
				t.Fatalf("%d series, want %d", got, len(want))
			}
			t.Logf("%s: %d series read back exactly", rt, got)
		})
	}
	_ = fmt.Sprint
}

package workload

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

var testStart = time.Unix(1796030250, 0)

func generate(t *testing.T, o Options) []Scrape {
	t.Helper()
	if o.Start.IsZero() {
		o.Start = testStart
	}
	sc, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestLoadTemplates(t *testing.T) {
	dir, err := FindDataDir()
	if err != nil {
		t.Fatal(err)
	}
	ts, err := LoadTemplates(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) < 400 || len(ts) > 700 {
		t.Fatalf("got %d series, want ~500", len(ts))
	}
	count := map[Behaviour]int{}
	byName := map[string]Template{}
	for _, tm := range ts {
		count[tm.Behaviour]++
		byName[tm.Labels.String()] = tm
		if tm.Labels.Has("job") || tm.Labels.Has("instance") {
			t.Fatalf("template %s already has job/instance", tm.Labels)
		}
	}
	for _, b := range []Behaviour{Constant, Gauge, Counter} {
		if count[b] < 10 {
			t.Errorf("only %d series of behaviour %d: %v", count[b], b, count)
		}
	}
	cpu := byName[`{__name__="node_cpu_seconds_total", cpu="0", mode="idle"}`]
	if cpu.Behaviour != Counter || cpu.Rate <= 0 || cpu.Meta.Type != "counter" {
		t.Errorf("node_cpu_seconds_total idle: %+v", cpu)
	}
	if tm := byName[`{__name__="go_goroutines"}`]; tm.Meta.Type != "gauge" || tm.Behaviour == Counter {
		t.Errorf("go_goroutines: %+v", tm)
	}
	// Values move in the steps of the real ones: pages, decimals, units.
	for name, q := range map[string]float64{
		`{__name__="node_memory_MemFree_bytes"}`:                    4096,
		`{__name__="node_cpu_seconds_total", cpu="0", mode="idle"}`: 0.01,
		`{__name__="go_goroutines"}`:                                1,
	} {
		if got := byName[name].Quantum; got != q {
			t.Errorf("%s: quantum %v, want %v", name, got, q)
		}
	}
}

func TestGenerateRealisticAndMonotonic(t *testing.T) {
	o := Options{Targets: 3, Scrapes: 30, Seed: 1, Histogram: true, JitterTargets: 1, Jitter: time.Second}
	scrapes := generate(t, o)
	if len(scrapes) != 90 {
		t.Fatalf("got %d scrapes, want 90", len(scrapes))
	}
	last := map[uint64]float64{}
	lastT := map[int]int64{}
	tmplByRef := map[uint64]string{}
	byTarget := map[int]int{}
	for i, sc := range scrapes {
		if i > 0 && sc.T < scrapes[i-1].T {
			t.Fatalf("scrapes not ordered by time at %d", i)
		}
		if prev, ok := lastT[sc.Target]; ok && sc.T <= prev {
			t.Fatalf("target %d: timestamp %d after %d", sc.Target, sc.T, prev)
		}
		lastT[sc.Target] = sc.T
		k := byTarget[sc.Target]
		byTarget[sc.Target]++
		nominal := testStart.UnixMilli() + int64(k)*15000
		if sc.Target < 2 && sc.T != nominal {
			t.Fatalf("aligned target %d scrape %d at %d, want %d", sc.Target, k, sc.T, nominal)
		}
		if d := sc.T - nominal; d < -1000 || d > 1000 {
			t.Fatalf("jitter %d ms beyond 1s", d)
		}
		var buckets []float64
		var les []float64
		var count float64
		for _, s := range sc.Samples {
			if s.Labels.Get("job") != "node" || s.Labels.Get("instance") != "host-"+strconv.Itoa(sc.Target)+":9100" {
				t.Fatalf("bad target labels %s", s.Labels)
			}
			if name, ok := tmplByRef[s.Ref]; ok && name != s.Labels.String() {
				t.Fatalf("ref %d changed labels", s.Ref)
			}
			tmplByRef[s.Ref] = s.Labels.String()
			typ := s.Meta.Type
			name := s.Labels.Get(labels.MetricName)
			if typ == "counter" || typ == "histogram" {
				if prev, ok := last[s.Ref]; ok && s.V < prev {
					t.Fatalf("counter %s decreased: %v -> %v", s.Labels, prev, s.V)
				}
			}
			if typ == "gauge" && math.Abs(s.V*100-math.Round(s.V*100)) > 1e-6*math.Max(1, math.Abs(s.V*100)) {
				t.Fatalf("gauge %s=%v has more than 2 decimals", s.Labels, s.V)
			}
			last[s.Ref] = s.V
			switch name {
			case "promhttp_metric_handler_request_duration_seconds_bucket":
				le, _ := strconv.ParseFloat(s.Labels.Get("le"), 64)
				les = append(les, le)
				buckets = append(buckets, s.V)
			case "promhttp_metric_handler_request_duration_seconds_count":
				count = s.V
			}
		}
		if len(buckets) != 12 {
			t.Fatalf("got %d buckets", len(buckets))
		}
		for i := 1; i < len(buckets); i++ {
			if les[i] <= les[i-1] || buckets[i] < buckets[i-1] {
				t.Fatalf("buckets not cumulative: %v %v", les, buckets)
			}
		}
		if buckets[len(buckets)-1] != count {
			t.Fatalf("+Inf bucket %v != count %v", buckets[len(buckets)-1], count)
		}
	}
	// Counters really move: node_cpu_seconds_total idle rises ~1/s per CPU.
	var first, final float64
	for _, sc := range scrapes {
		for _, s := range sc.Samples {
			if sc.Target == 0 && s.Labels.Get(labels.MetricName) == "node_cpu_seconds_total" && s.Labels.Get("cpu") == "0" && s.Labels.Get("mode") == "idle" {
				if first == 0 {
					first = s.V
				}
				final = s.V
			}
		}
	}
	if rate := (final - first) / (29 * 15); rate < 0.2 || rate > 2 {
		t.Errorf("idle cpu rate %v/s, want about 1", rate)
	}
}

func TestGenerateDeterministic(t *testing.T) {
	a := generate(t, Options{Targets: 2, Scrapes: 5, Seed: 7, JitterTargets: 1})
	b := generate(t, Options{Targets: 2, Scrapes: 5, Seed: 7, JitterTargets: 1})
	c := generate(t, Options{Targets: 2, Scrapes: 5, Seed: 8, JitterTargets: 1})
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different workloads")
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds gave equal workloads")
	}
}

// TestBuildAndSend checks sharding, batching and that both protocol versions
// arrive complete and decodable through the real client.
func TestBuildAndSend(t *testing.T) {
	scrapes := generate(t, Options{Targets: 4, Scrapes: 6, Seed: 3, Histogram: true})
	total := 0
	for _, sc := range scrapes {
		total += len(sc.Samples)
	}
	for _, version := range []int{1, 2} {
		t.Run("v"+strconv.Itoa(version), func(t *testing.T) {
			opts := SendOptions{Version: version, Shards: 3, MaxSamplesPerSend: 500}
			reqs, err := BuildRequests(scrapes, opts)
			if err != nil {
				t.Fatal(err)
			}
			for sh, rs := range reqs {
				for i, r := range rs {
					if r.Samples > 500 || r.Samples == 0 || r.Shard != sh {
						t.Fatalf("bad request: shard %d samples %d", r.Shard, r.Samples)
					}
					if i > 0 && r.Round < rs[i-1].Round {
						t.Fatalf("shard %d: rounds go back: %d after %d", sh, r.Round, rs[i-1].Round)
					}
				}
				// 6 scrapes 15s apart with a 5s deadline: at least one round per scrape.
				if rs[len(rs)-1].Round < 15 {
					t.Fatalf("shard %d: last round %d, want >= 15", sh, rs[len(rs)-1].Round)
				}
			}
			opts.Lockstep = version == 2
			var (
				mu    sync.Mutex
				got   = map[string][]int64{} // series -> timestamps, in arrival order
				typed int                    // v2 series with a type and help
				fails atomic.Int32
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if fails.Add(1) <= 2 {
					http.Error(w, "try again", http.StatusServiceUnavailable)
					return
				}
				body, _ := io.ReadAll(r.Body)
				raw, err := snappy.Decode(nil, body)
				if err != nil {
					t.Error(err)
					return
				}
				n := 0
				mu.Lock()
				defer mu.Unlock()
				if version == 1 {
					var req prompb.WriteRequest
					if err := req.Unmarshal(raw); err != nil {
						t.Error(err)
						return
					}
					for _, ts := range req.Timeseries {
						k := labelsString(ts.Labels)
						for _, s := range ts.Samples {
							got[k] = append(got[k], s.Timestamp)
							n++
						}
					}
				} else {
					var req writev2.Request
					if err := req.Unmarshal(raw); err != nil {
						t.Error(err)
						return
					}
					for _, ts := range req.Timeseries {
						if ts.Metadata.Type != writev2.Metadata_METRIC_TYPE_UNSPECIFIED && req.Symbols[ts.Metadata.HelpRef] != "" {
							typed++
						}
						var b labels.ScratchBuilder
						ls, err := ts.ToLabels(&b, req.Symbols)
						if err != nil {
							t.Error(err)
							return
						}
						k := ls.String()
						for _, s := range ts.Samples {
							got[k] = append(got[k], s.Timestamp)
							n++
						}
					}
					w.Header().Set("X-Prometheus-Remote-Write-Samples-Written", strconv.Itoa(n))
					w.Header().Set("X-Prometheus-Remote-Write-Histograms-Written", "0")
					w.Header().Set("X-Prometheus-Remote-Write-Exemplars-Written", "0")
				}
				w.WriteHeader(http.StatusNoContent)
			}))
			defer srv.Close()
			st, err := SendRequests(context.Background(), srv.URL+"/api/v1/write", reqs, opts)
			if err != nil {
				t.Fatal(err)
			}
			if st.Samples != int64(total) || st.Retries < 2 {
				t.Fatalf("stats %+v, want %d samples and >= 2 retries", st, total)
			}
			n := 0
			for k, ts := range got {
				n += len(ts)
				if len(ts) != 6 {
					t.Fatalf("%s: %d samples, want 6", k, len(ts))
				}
				for i := 1; i < len(ts); i++ {
					if ts[i] <= ts[i-1] {
						t.Fatalf("%s: samples out of order (shard sent out of order)", k)
					}
				}
			}
			if version == 2 && typed < total/2 {
				t.Fatalf("only %d of %d v2 series carry metadata", typed, total)
			}
			if n != total {
				t.Fatalf("received %d samples, want %d", n, total)
			}
			// Pre-encoded requests decode to the same messages.
			enc, err := EncodeAll(reqs)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := snappy.Decode(nil, enc[0][0].Body)
			if err != nil {
				t.Fatal(err)
			}
			if version == 1 {
				var req prompb.WriteRequest
				if err := req.Unmarshal(raw); err != nil || len(req.Timeseries) != reqs[0][0].Samples || len(req.Metadata) == 0 {
					t.Fatalf("decode pre-encoded v1: %v, %d series, %d metadata", err, len(req.Timeseries), len(req.Metadata))
				}
			} else {
				var req writev2.Request
				if err := req.Unmarshal(raw); err != nil || len(req.Timeseries) != reqs[0][0].Samples || req.Symbols[0] != "" {
					t.Fatalf("decode pre-encoded v2: %v", err)
				}
			}
		})
	}
}

func labelsString(ls []prompb.Label) string {
	b := labels.NewScratchBuilder(len(ls))
	for _, l := range ls {
		b.Add(l.Name, l.Value)
	}
	b.Sort()
	return b.Labels().String()
}

// TestGenerateKeepsQuanta: generated memory gauges stay whole pages, as the
// real ones are.
func TestGenerateKeepsQuanta(t *testing.T) {
	n := 0
	for _, sc := range generate(t, Options{Targets: 2, Scrapes: 50, Seed: 7}) {
		for _, s := range sc.Samples {
			if s.Labels.Get("__name__") == "node_memory_MemFree_bytes" {
				n++
				if math.Mod(s.V, 4096) != 0 {
					t.Fatalf("node_memory_MemFree_bytes %v is not a whole number of pages", s.V)
				}
			}
		}
	}
	if n != 100 {
		t.Fatalf("%d samples of node_memory_MemFree_bytes, want 100", n)
	}
}

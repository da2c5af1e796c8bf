package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	promqlengine "github.com/prometheus/prometheus/promql"

	"github.com/tandem-tsdb/tandem/workload"
)

// lateOpts generates a small node_exporter-like workload (a subset of the
// real scrape's series, to keep hours of data quick).
func lateScrapes(t *testing.T, targets, scrapes int, start time.Time, seed uint64) []workload.Scrape {
	t.Helper()
	dir, err := workload.FindDataDir()
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := workload.LoadTemplates(dir)
	if err != nil {
		t.Fatal(err)
	}
	var sub []workload.Template
	for _, tp := range tmpl {
		if tp.Family == "node_cpu_seconds_total" || tp.Family == "node_load1" || tp.Family == "node_memory_MemAvailable_bytes" {
			sub = append(sub, tp)
		}
	}
	sc, err := workload.Generate(workload.Options{Targets: targets, Scrapes: scrapes, Start: start, Seed: seed, Templates: sub})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// compareRange runs range queries over [from, to] on tandem and on a
// Prometheus TSDB holding the expected samples.
func compareRange(t *testing.T, p *tandemProc, want []workload.Scrape, from, to int64, phase string) {
	t.Helper()
	ref := loadReference(t, want)
	engine := promqlengine.NewEngine(promqlengine.EngineOpts{MaxSamples: 50_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	ctx := context.Background()
	for _, q := range []string{
		`sum by (instance) (rate(node_cpu_seconds_total[2m]))`,
		`count_over_time(node_load1[10m])`,
		`max by (instance) (node_memory_MemAvailable_bytes)`,
	} {
		var d queryData
		p.api(t, "/api/v1/query_range", url.Values{"query": {q}, "start": {fmtTime(from)}, "end": {fmtTime(to)}, "step": {"97"}}, false, &d)
		qry, err := engine.NewRangeQuery(ctx, ref, nil, q, time.UnixMilli(from), time.UnixMilli(to), 97*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		compareSeries(t, fmt.Sprintf("%s: %s", phase, q), decodeResult(t, d), fromPromQL(t, qry.Exec(ctx)))
		qry.Close()
	}
}

func send(t *testing.T, p *tandemProc, version int, scrapes []workload.Scrape, shards int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := workload.Send(ctx, p.url+"/api/v1/write", version, scrapes, shards, 2000); err != nil {
		t.Fatalf("send: %v\n%s", err, p.log)
	}
}

// postV1 sends one hand-built 1.0 request and returns the status code.
func postV1(t *testing.T, p *tandemProc, req *prompb.WriteRequest) int {
	t.Helper()
	raw, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(p.url+"/api/v1/write", "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, raw)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestLateDataEndToEnd: a target 3 hours behind catches up while another is
// current and the head has been flushed past its data; shuffled delivery
// within the window; resent and conflicting batches. Every result equals
// in-order delivery of the same samples into Prometheus's TSDB.
func TestLateDataEndToEnd(t *testing.T) {
	const hours = 4
	start := time.Now().Add(-hours * time.Hour).Truncate(time.Minute)
	all := lateScrapes(t, 2, hours*240, start, 21)
	var fast, slowEarly, slowLate []workload.Scrape
	split := start.Add(time.Hour).UnixMilli()
	for _, sc := range all {
		switch {
		case sc.Target == 0:
			fast = append(fast, sc)
		case sc.T < split:
			slowEarly = append(slowEarly, sc)
		default:
			slowLate = append(slowLate, sc)
		}
	}
	dir := t.TempDir()
	args := []string{"--storage.block-range=30m", "--head.maintenance-interval=20ms"}
	p := startTandem(t, dir, args...)
	send(t, p, 1, append(append([]workload.Scrape{}, slowEarly...), fast...), 4)
	// The healthy target moved the head on: its old ranges go to blocks.
	for deadline := time.Now().Add(20 * time.Second); blocksCoverage(t, p) < 3*1800000; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("head not flushed\n%s", p.log)
		}
	}
	// The lagging target catches up, 3 hours late, shuffled within chunks of
	// 20 scrapes (out of order within the 1h window), over protocol 2.0.
	shuffled := append([]workload.Scrape{}, slowLate...)
	for i := 0; i+20 <= len(shuffled); i += 20 {
		for j := 0; j < 10; j++ {
			shuffled[i+j], shuffled[i+19-j] = shuffled[i+19-j], shuffled[i+j]
		}
	}
	for i := 0; i < len(shuffled); i += 20 {
		send(t, p, 2, shuffled[i:min(i+20, len(shuffled))], 2)
	}
	from, to := all[0].T, all[len(all)-1].T
	compareRange(t, p, all, from, to, "after catching up")

	// A resent batch is accepted again without change; a conflicting value
	// for a sample in the head is refused. (For a late sample already moved
	// to an out-of-order block a conflicting value is not detected: the
	// block's value and the new one meet at compaction, the newer wins.)
	send(t, p, 1, slowLate[:30], 2)
	s0 := fast[len(fast)-5]
	conflict := &prompb.WriteRequest{}
	var pl []prompb.Label
	s0.Samples[0].Labels.Range(func(l labels.Label) { pl = append(pl, prompb.Label{Name: l.Name, Value: l.Value}) })
	conflict.Timeseries = []prompb.TimeSeries{{Labels: pl, Samples: []prompb.Sample{{Timestamp: s0.T, Value: s0.Samples[0].V + 1}}}}
	if code := postV1(t, p, conflict); code != http.StatusBadRequest {
		t.Fatalf("conflicting value: HTTP %d, want 400", code)
	}
	compareRange(t, p, all, from, to, "after resend and conflict")

	// Out-of-order blocks are written, compacted, and survive restarts.
	for deadline := time.Now().Add(20 * time.Second); scrapeMetrics(t, p)["tandem_head_out_of_order_samples_total"] == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no out-of-order samples counted")
		}
	}
	time.Sleep(300 * time.Millisecond) // a few maintenance rounds
	p.signal(9)
	p = startTandem(t, dir, args...)
	compareRange(t, p, all, from, to, "after kill -9")
	p.signal(15)
	p = startTandem(t, dir, args...)
	compareRange(t, p, all, from, to, "after restart")
}

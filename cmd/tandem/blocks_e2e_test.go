package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	promqlengine "github.com/prometheus/prometheus/promql"

	"github.com/tandem-tsdb/tandem/workload"
)

// TestBlocksEndToEnd sends half an hour of data to a tandem that flushes
// 2-minute blocks, and checks query results against Prometheus's TSDB while
// most data is in blocks, after a kill -9 and after a clean restart.
func TestBlocksEndToEnd(t *testing.T) {
	const targets, nScrapes = 5, 120
	interval := 15 * time.Second
	start := time.Now().Add(-nScrapes * interval).Truncate(time.Second)
	scrapes, err := workload.Generate(workload.Options{Targets: targets, Scrapes: nScrapes, Interval: interval, Start: start, Seed: 11, Histogram: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	args := []string{"--storage.block-range=2m", "--head.maintenance-interval=50ms", "--log.level=info", "--web.enable-admin-api"}
	p := startTandem(t, dir, args...)
	ref := loadReference(t, scrapes)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := workload.Send(ctx, p.url+"/api/v1/write", 1, scrapes, 4, 2000); err != nil {
		t.Fatalf("send: %v\n%s", err, p.log)
	}
	// Half an hour of data in 2-minute blocks: at least ten flushes (which
	// compaction then merges into 6- and 18-minute blocks).
	deadline := time.Now().Add(20 * time.Second)
	for blocksCoverage(t, p) < 10*120000 {
		if time.Now().After(deadline) {
			t.Fatalf("blocks cover less than 20 minutes after 20s\n%s", p.log)
		}
		time.Sleep(50 * time.Millisecond)
	}

	first, last := scrapes[0].T, scrapes[len(scrapes)-1].T
	engine := promqlengine.NewEngine(promqlengine.EngineOpts{MaxSamples: 50_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	queries := []string{
		`sum by (instance) (rate(node_cpu_seconds_total[1m]))`,
		`histogram_quantile(0.9, sum by (le) (rate(promhttp_metric_handler_request_duration_seconds_bucket[5m])))`,
		`count by (job) ({__name__=~"node_.*"})`,
		`max_over_time(node_memory_MemAvailable_bytes[3m])`,
	}
	check := func(p *tandemProc, phase string) {
		t.Helper()
		for _, q := range queries {
			var d queryData
			params := url.Values{"query": {q}, "start": {fmtTime(first)}, "end": {fmtTime(last)}, "step": {"41"}}
			p.api(t, "/api/v1/query_range", params, false, &d)
			qry, err := engine.NewRangeQuery(ctx, ref, nil, q, time.UnixMilli(first), time.UnixMilli(last), 41*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			compareSeries(t, fmt.Sprintf("%s: range %s", phase, q), decodeResult(t, d), fromPromQL(t, qry.Exec(ctx)))
			qry.Close()
		}
	}
	check(p, "blocks and head")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		m := scrapeMetrics(t, p)
		if m["tandem_compactions_total"] > 0 && m["tandem_compaction_written_bytes_total"] > 0 && m["tandem_compaction_cpu_seconds_total"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no compaction visible in /metrics: compactions %v, bytes %v, cpu %v",
				m["tandem_compactions_total"], m["tandem_compaction_written_bytes_total"], m["tandem_compaction_cpu_seconds_total"])
		}
	}
	var blocks struct {
		Blocks []struct {
			ULID    string `json:"ulid"`
			MinTime int64  `json:"minTime"`
			MaxTime int64  `json:"maxTime"`
			Stats   struct {
				NumSamples uint64 `json:"numSamples"`
			} `json:"stats"`
		} `json:"blocks"`
	}
	p.api(t, "/api/v1/status/tsdb/blocks", nil, false, &blocks)
	if len(blocks.Blocks) == 0 || blocks.Blocks[0].Stats.NumSamples == 0 || (blocks.Blocks[0].MaxTime-blocks.Blocks[0].MinTime)%120000 != 0 {
		t.Errorf("status/tsdb/blocks: %+v", blocks)
	}
	if t.Failed() {
		t.Log(p.log.String())
	}

	p.signal(9) // SIGKILL
	p = startTandem(t, dir, args...)
	check(p, "after kill -9")
	p.signal(15) // SIGTERM
	p = startTandem(t, dir, args...)
	check(p, "after restart")
	if c := blocksCoverage(t, p); c < 10*120000 {
		t.Fatalf("blocks cover %d ms after restart", c)
	}

	// A snapshot through the admin API is a data directory of its own.
	var snap struct {
		Name string `json:"name"`
	}
	p.api(t, "/api/v1/admin/tsdb/snapshot", url.Values{}, true, &snap)
	snapDir := filepath.Join(dir, "snapshots", snap.Name)
	if out, err := exec.Command(tandemBin, "tsdb", "verify", "--storage.path="+snapDir).CombinedOutput(); err != nil || strings.Count(string(out), ": ok") < 1 {
		t.Fatalf("snapshot %q: %v\n%s", snap.Name, err, out)
	}
	sp := startTandem(t, snapDir)
	check(sp, "snapshot")
	sp.signal(15)

	// delete_series hides a series at once, across blocks and head; the
	// tombstone survives a restart; clean_tombstones rewrites the blocks.
	post := func(path string, form url.Values) {
		resp, err := http.PostForm(p.url+path, form)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("%s: HTTP %d: %s", path, resp.StatusCode, body)
		}
	}
	countLoad := func(p *tandemProc) int {
		var d queryData
		p.api(t, "/api/v1/query", url.Values{"query": {"count(count_over_time(node_load1[1h]))"}, "time": {fmtTime(last)}}, false, &d)
		return len(decodeResult(t, d))
	}
	if countLoad(p) != 1 {
		t.Fatal("node_load1 missing before the delete")
	}
	post("/api/v1/admin/tsdb/delete_series", url.Values{"match[]": {"node_load1"}})
	if n := countLoad(p); n != 0 {
		t.Fatalf("node_load1 still visible after delete_series (%d results)", n)
	}
	p.signal(15)
	p = startTandem(t, dir, args...)
	if n := countLoad(p); n != 0 {
		t.Fatal("node_load1 visible again after a restart")
	}
	post("/api/v1/admin/tsdb/clean_tombstones", nil)
	if n := countLoad(p); n != 0 {
		t.Fatal("node_load1 visible again after clean_tombstones")
	}

	// The offline tools read the same directory. How many blocks it holds
	// depends on the clock: compaction merges the blocks of aligned windows
	// (3, 9, 27, 81 × 2 m) the head has passed, so 30 minutes of data may
	// end up in one block.
	out, err := exec.Command(tandemBin, "tsdb", "verify", "--storage.path="+dir).CombinedOutput()
	if err != nil || strings.Count(string(out), ": ok") < 1 || strings.Contains(string(out), "CORRUPT") {
		t.Fatalf("tandem tsdb verify: %v\n%s", err, out)
	}
	out, err = exec.Command(tandemBin, "tsdb", "inspect", "--storage.path="+dir, "--groups").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "TOTAL") || !strings.Contains(string(out), "group ") {
		t.Fatalf("tandem tsdb inspect: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "TOTAL") || strings.HasPrefix(line, "column chunks") {
			t.Log(line)
		}
	}
	// A damaged block is reported.
	blocksOut, _ := exec.Command(tandemBin, "tsdb", "verify", "--storage.path="+dir).CombinedOutput()
	victim := strings.Fields(string(blocksOut))[0]
	if err := os.WriteFile(filepath.Join(strings.TrimSuffix(victim, ":"), "chunks"), []byte("TNDC garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(tandemBin, "tsdb", "verify", "--storage.path="+dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "CORRUPT") {
		t.Fatalf("verify of a damaged block: %v\n%s", err, out)
	}
}

// blocksCoverage returns the milliseconds covered by tandem's blocks.
func blocksCoverage(t *testing.T, p *tandemProc) int64 {
	t.Helper()
	var blocks struct {
		Blocks []struct {
			MinTime int64 `json:"minTime"`
			MaxTime int64 `json:"maxTime"`
		} `json:"blocks"`
	}
	p.api(t, "/api/v1/status/tsdb/blocks", nil, false, &blocks)
	var c int64
	for _, b := range blocks.Blocks {
		c += b.MaxTime - b.MinTime
	}
	return c
}

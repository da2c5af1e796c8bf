package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/tandem-tsdb/tandem/internal/tmpfs"
)

// TestFullDiskEndToEnd runs tandem on a small tmpfs, fills it, and sends one
// target's 20 series over 4 shards, each request retried every 200 ms on a
// 5xx as Prometheus does. While the disk is full writes are answered 503
// with Retry-After and /-/ready fails (before the fix, every retry of a
// refused request was acknowledged with nothing in the WAL);
// once space returns tandem takes writes again by itself, and after kill -9
// and a restart every acknowledged sample is there.
func TestFullDiskEndToEnd(t *testing.T) {
	mnt := tmpfs.Mount(t, 16<<20)
	data := filepath.Join(mnt, "data")
	p := startTandem(t, data, "--storage.wal.segment-size=1048576")

	const shards, perShard, rounds = 4, 5, 400
	base := time.Now().Add(-10 * time.Minute).UnixMilli()
	request := func(shard, round int) []byte {
		req := &prompb.WriteRequest{}
		for i := range perShard {
			s := prompb.TimeSeries{Labels: []prompb.Label{
				{Name: "__name__", Value: "disk_test"}, {Name: "instance", Value: "i"}, {Name: "job", Value: "full"},
				{Name: "series", Value: strconv.Itoa(shard*perShard + i)},
			}}
			s.Samples = []prompb.Sample{{Timestamp: base + int64(round)*1000, Value: float64(round*100 + shard*perShard + i)}}
			req.Timeseries = append(req.Timeseries, s)
		}
		b, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return snappy.Encode(nil, b)
	}
	post := func(body []byte) (int, http.Header) {
		r, err := http.NewRequest(http.MethodPost, p.url+"/api/v1/write", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Content-Encoding", "snappy")
		r.Header.Set("Content-Type", "application/x-protobuf")
		r.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	ready := func() int {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	// Round 0 goes in before the disk fills.
	for s := range shards {
		if code, _ := post(request(s, 0)); code != http.StatusNoContent {
			t.Fatalf("round 0 shard %d: %d", s, code)
		}
	}
	filler := tmpfs.Fill(t, mnt)

	// Senders retry every request until it is acknowledged. The disk is
	// freed once every shard has seen a 503 a few times.
	var (
		mu       sync.Mutex
		acked    = map[[2]int]bool{}
		refusals = make(chan struct{}, 1000)
		wg       sync.WaitGroup
		bad      []string
	)
	for s := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 1; round <= rounds; round++ {
				body := request(s, round)
				for attempt := 0; ; attempt++ {
					if attempt > 300 {
						mu.Lock()
						bad = append(bad, fmt.Sprintf("shard %d round %d: not acknowledged after %d attempts", s, round, attempt))
						mu.Unlock()
						return
					}
					// A record small enough for the last page's slack may
					// still be written (and acknowledged) while the disk is
					// full; what matters is that an acknowledged record is in
					// the WAL, which the restart below checks.
					code, hdr := post(body)
					if code/100 == 2 {
						mu.Lock()
						acked[[2]int{s, round}] = true
						mu.Unlock()
						break
					}
					if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
						mu.Lock()
						bad = append(bad, fmt.Sprintf("shard %d round %d: status %d, Retry-After %q; want 503 with Retry-After", s, round, code, hdr.Get("Retry-After")))
						mu.Unlock()
					}
					refusals <- struct{}{}
					time.Sleep(200 * time.Millisecond)
				}
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(refusals) < 3*shards {
		if time.Now().After(deadline) {
			t.Fatalf("only %d refusals on a full disk", len(refusals))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := ready(); code != http.StatusServiceUnavailable {
		t.Errorf("/-/ready on a full disk: %d, want 503", code)
	}
	if m := scrapeMetrics(t, p); m["tandem_head_writable"] != 0 {
		t.Errorf("tandem_head_writable on a full disk: %v, want 0", m["tandem_head_writable"])
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, b := range bad {
		t.Error(b)
	}
	if code := ready(); code != http.StatusOK {
		t.Errorf("/-/ready after space returned: %d", code)
	}
	if len(acked) != shards*rounds {
		t.Fatalf("%d of %d requests acknowledged", len(acked), shards*rounds)
	}

	p.signal(syscall.SIGKILL)
	p2 := startTandem(t, data)
	var d queryData
	p2.api(t, "/api/v1/query", url.Values{"query": {"count_over_time(disk_test[10m])"}, "time": {fmtTime(base + rounds*1000 + 1000)}}, true, &d)
	got := decodeResult(t, d)
	if len(got) != shards*perShard {
		t.Fatalf("%d series after restart, want %d", len(got), shards*perShard)
	}
	for _, s := range got {
		if len(s.V) != 1 || s.V[0] != rounds+1 {
			t.Errorf("%s: %v samples after restart, want %d", s.Labels, s.V, rounds+1)
		}
	}
}

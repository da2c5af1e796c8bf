package api

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	config_util "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/storage/remote"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// readMemSeries describes one series of the remote-read memory test: n samples
// every step ms from readMemStart, the i-th valued readMemValue(kind, i).
type readMemSeries struct {
	lset labels.Labels
	kind string
	n    int
	step int64
}

const readMemStart = int64(1_700_006_400_000) // a multiple of the block range

func (s readMemSeries) t(i int) int64 { return readMemStart + int64(i)*s.step }

func readMemMix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// readMemValue is sample i of a series of the kind: bits are arbitrary 64-bit
// patterns (barely compressible: ~9 bytes a sample in XOR chunks) with
// NaNs and stale markers among them.
func readMemValue(kind string, i int) float64 {
	switch kind {
	case "counter":
		return float64(i/7) * 2.5
	case "gauge":
		switch {
		case i%1009 == 0:
			return math.Float64frombits(value.StaleNaN)
		case i%331 == 0:
			return math.NaN()
		}
		return float64(int64(readMemMix(uint64(i))%200001)-100000) / 100
	default:
		switch {
		case i%997 == 0:
			return math.Float64frombits(value.StaleNaN)
		case i%499 == 0:
			return math.NaN()
		}
		return math.Float64frombits(readMemMix(uint64(i) ^ 0x5bd1e995))
	}
}

// readMemTransport counts the response bytes read by the remote-read client.
type readMemTransport struct {
	rt http.RoundTripper
	n  atomic.Int64
}

func (c *readMemTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err == nil {
		resp.Body = &readMemBody{ReadCloser: resp.Body, n: &c.n}
	}
	return resp, err
}

type readMemBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *readMemBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// readMemPeak samples the heap's object bytes every millisecond until stopped.
type readMemPeak struct {
	stop chan struct{}
	done chan struct{}
	max  uint64
}

const readMemHeapMetric = "/memory/classes/heap/objects:bytes"

func readMemHeap() uint64 {
	s := []metrics.Sample{{Name: readMemHeapMetric}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startReadMemPeak() *readMemPeak {
	p := &readMemPeak{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		s := []metrics.Sample{{Name: readMemHeapMetric}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			p.max = max(p.max, s[0].Value.Uint64())
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

func (p *readMemPeak) end() uint64 {
	close(p.stop)
	<-p.done
	return p.max
}

// TestRemoteReadStreamedMemory serves a streamed remote read of more than 3
// million samples (mostly in blocks, the newest in the head; one series alone
// encodes to more than 20 MiB of XOR chunks) through the API's remote-read
// handler with 64 KiB frames, read by Prometheus's remote-read client frame
// by frame: the server's heap may grow by a few frames' worth only, not by
// the series' chunks (which Prometheus's storage.NewSeriesSetToChunkSet
// builds all at once: about 36 MiB of growth here). Every sample must arrive,
// bit for bit. SAMPLES responses and their sample limit are checked too.
func TestRemoteReadStreamedMemory(t *testing.T) {
	const (
		frameBytes  = 64 << 10
		sampleLimit = 200_000
		// maxGrowth bounds the heap's growth during the streamed read.
		maxGrowth = 16 << 20
	)
	series := []readMemSeries{
		{lset: labels.FromStrings("__name__", "mem_bits", "job", "mem", "instance", "a"), kind: "bits", n: 2_600_000, step: 100},
		{lset: labels.FromStrings("__name__", "mem_counter", "job", "mem", "instance", "b"), kind: "counter", n: 260_000, step: 1000},
		{lset: labels.FromStrings("__name__", "mem_gauge", "job", "mem", "instance", "c"), kind: "gauge", n: 260_000, step: 1000},
	}
	total := 0
	end := int64(0)
	for _, s := range series {
		total += s.n
		end = max(end, s.t(s.n-1))
	}

	built := time.Now()
	opts := tsdb.DBOptions{Head: head.DefaultOptions()}
	opts.Head.BlockRange = 12 * time.Hour
	opts.Head.WALSyncInterval = time.Hour
	opts.Head.Now = func() int64 { return end }
	db, err := tsdb.OpenDB(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const batchMs = 1_000_000 // appended 1000 s at a time
	var b head.Batch
	next := make([]int, len(series))
	bufs := make([][]head.Sample, len(series))
	for from := readMemStart; from <= end; from += batchMs {
		b.Reset()
		for k, s := range series {
			smp := bufs[k][:0]
			for ; next[k] < s.n && s.t(next[k]) < from+batchMs; next[k]++ {
				smp = append(smp, head.Sample{T: s.t(next[k]), V: readMemValue(s.kind, next[k])})
			}
			bufs[k] = smp
			b.Series = append(b.Series, head.BatchSeries{Labels: s.lset, Samples: smp})
		}
		res, err := db.AppendBatch(context.Background(), &b)
		if err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	st, err := db.Stats("", 0)
	if err != nil {
		t.Fatal(err)
	}
	headSeries := int(st.NumSeries)
	if len(db.Blocks()) < 3 || headSeries != len(series) {
		t.Fatalf("%d blocks, %d series in the head: want data in blocks and head", len(db.Blocks()), headSeries)
	}
	t.Logf("%d samples in %d series, %d blocks + head, written in %v", total, len(series), len(db.Blocks()), time.Since(built).Round(time.Millisecond))

	api := Options{Queryable: db, RemoteReadSampleLimit: sampleLimit, RemoteReadMaxBytesInFrame: frameBytes}
	h, err := NewHandler(api, newEngine(api))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h) // on 127.0.0.1
	defer srv.Close()
	u, _ := url.Parse(srv.URL + "/api/v1/read")
	client := func(rt prompb.ReadRequest_ResponseType) (*remote.Client, *readMemTransport) {
		rc, err := remote.NewReadClient("tandem", &remote.ClientConfig{
			URL: &config_util.URL{URL: u}, Timeout: model.Duration(2 * time.Minute),
			AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{rt}, ChunkedReadLimit: 4 * frameBytes,
		})
		if err != nil {
			t.Fatal(err)
		}
		c := rc.(*remote.Client)
		ct := &readMemTransport{rt: c.Client.Transport}
		c.Client.Transport = ct
		return c, ct
	}
	query := func(mint, maxt int64) *prompb.Query {
		q, err := remote.ToQuery(mint, maxt, []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "job", "mem")},
			&storage.SelectHints{Start: mint, End: maxt})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	// check reads ss, whose series may be split over consecutive frames, and
	// compares every sample with what was written in [mint, maxt]: all of
	// them, each bit for bit, from the first to the last timestamp.
	check := func(t *testing.T, ss storage.SeriesSet, mint, maxt int64) (got int) {
		t.Helper()
		cur, i, n := -1, 0, 0 // current series, its next sample, samples read
		first, last := int64(math.MaxInt64), int64(math.MinInt64)
		seen := 0
		var it chunkenc.Iterator
		finish := func() {
			if cur < 0 {
				return
			}
			s := series[cur]
			lo, hi := 0, s.n-1
			for lo < s.n && s.t(lo) < mint {
				lo++
			}
			for hi >= 0 && s.t(hi) > maxt {
				hi--
			}
			if n != hi-lo+1 || first != s.t(lo) || last != s.t(hi) {
				t.Fatalf("%v: %d samples in [%d, %d], want %d in [%d, %d]", s.lset, n, first, last, hi-lo+1, s.t(lo), s.t(hi))
			}
			seen++
		}
		for ss.Next() {
			s := ss.At()
			k := -1
			for j := range series {
				if labels.Equal(series[j].lset, s.Labels()) {
					k = j
				}
			}
			if k < 0 {
				t.Fatalf("unexpected series %v", s.Labels())
			}
			if k != cur {
				if k < cur {
					t.Fatalf("series %v out of order", s.Labels())
				}
				finish()
				cur, i, n = k, 0, 0
				first, last = math.MaxInt64, math.MinInt64
				for i < series[k].n && series[k].t(i) < mint {
					i++
				}
			}
			want := series[k]
			it = s.Iterator(it)
			for typ := it.Next(); typ != chunkenc.ValNone; typ = it.Next() {
				ts, v := it.At()
				if typ != chunkenc.ValFloat || i >= want.n || ts != want.t(i) || math.Float64bits(v) != math.Float64bits(readMemValue(want.kind, i)) {
					t.Fatalf("%v sample %d: got %s (%d, %x), want (%d, %x)", want.lset, i, typ, ts, math.Float64bits(v), want.t(i), math.Float64bits(readMemValue(want.kind, i)))
				}
				first, last = min(first, ts), max(last, ts)
				i++
				n++
				got++
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := ss.Err(); err != nil {
			t.Fatal(err)
		}
		finish()
		if seen != len(series) {
			t.Fatalf("%d series read, want %d", seen, len(series))
		}
		return got
	}
	ctx := context.Background()

	t.Run("streamed", func(t *testing.T) {
		c, ct := client(prompb.ReadRequest_STREAMED_XOR_CHUNKS)
		// A low GOGC: the heap's peak then shows what the read keeps
		// reachable, not garbage the collector lets pile up to the size of
		// the live heap (the head's data, whatever the query).
		gc := debug.SetGCPercent(10)
		defer debug.SetGCPercent(gc)
		runtime.GC()
		runtime.GC()
		base := readMemHeap()
		peak := startReadMemPeak()
		started := time.Now()
		ss, err := c.Read(ctx, query(readMemStart, end), false)
		if err != nil {
			t.Fatal(err)
		}
		got := check(t, ss, readMemStart, end)
		top := peak.end()
		growth := int64(top) - int64(base)
		t.Logf("streamed %d samples (%.1f MiB as 16-byte samples), %.1f MiB in frames of %d KiB, in %v; heap %.1f MiB before, peak growth %.1f MiB",
			got, float64(16*got)/(1<<20), float64(ct.n.Load())/(1<<20), frameBytes>>10, time.Since(started).Round(time.Millisecond),
			float64(base)/(1<<20), float64(growth)/(1<<20))
		if got != total {
			t.Fatalf("%d samples read, want %d", got, total)
		}
		if ct.n.Load() < 20<<20 {
			t.Fatalf("response of %d bytes: the test needs a larger one", ct.n.Load())
		}
		if growth > maxGrowth || growth > ct.n.Load()/4 {
			t.Fatalf("heap grew by %.1f MiB while streaming %.1f MiB: want at most %d MiB and a quarter of the response",
				float64(growth)/(1<<20), float64(ct.n.Load())/(1<<20), maxGrowth>>20)
		}
	})

	t.Run("samples", func(t *testing.T) {
		c, _ := client(prompb.ReadRequest_SAMPLES)
		// A window across the newest block and the head, under the limit.
		edge := int64(math.MinInt64)
		for _, m := range db.Blocks() {
			edge = max(edge, m.MaxTime)
		}
		mint, maxt := edge-2*time.Hour.Milliseconds(), edge+90*time.Minute.Milliseconds()
		ss, err := c.Read(ctx, query(mint, maxt), true)
		if err != nil {
			t.Fatal(err)
		}
		got := check(t, ss, mint, maxt)
		if got == 0 || got > sampleLimit {
			t.Fatalf("%d samples read", got)
		}
		t.Logf("SAMPLES: %d samples read back exactly", got)
		// All of it: the handler refuses with Prometheus's error (the
		// streamed read above had no such limit).
		_, err = c.Read(ctx, query(readMemStart, end), true)
		want := fmt.Sprintf("remote server %s returned http status 400 Bad Request: exceeded sample limit (%d)", u, sampleLimit)
		if err == nil || err.Error() != want {
			t.Fatalf("read over the sample limit: got error %v, want %q", err, want)
		}
	})
}

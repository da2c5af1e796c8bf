package head

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	promtsdb "github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/wlog"
	"github.com/prometheus/prometheus/util/compression"
)

// benchWorkload is node_exporter-like: targets × series, one scrape = one
// timestamp for all series of a target; values are counters (noisy rates),
// 2-decimal gauges and constants.
type benchWorkload struct {
	lsets  []labels.Labels
	kind   []int // 0 counter, 1 gauge, 2 constant
	values []float64
	shards int
}

func newBenchWorkload(targets, perTarget, shards int) *benchWorkload {
	w := &benchWorkload{shards: shards}
	modes := []string{"idle", "user", "system", "iowait", "irq", "softirq", "steal", "nice"}
	for tg := 0; tg < targets; tg++ {
		inst := fmt.Sprintf("host-%d:9100", tg)
		for i := 0; i < perTarget; i++ {
			var l labels.Labels
			switch i % 4 {
			case 0:
				l = labels.FromStrings("__name__", "node_cpu_seconds_total", "cpu", fmt.Sprint(i/32), "instance", inst, "job", "node", "mode", modes[(i/4)%8])
			case 1:
				l = labels.FromStrings("__name__", "node_network_receive_bytes_total", "device", fmt.Sprintf("eth%d", i), "instance", inst, "job", "node")
			case 2:
				l = labels.FromStrings("__name__", "node_filesystem_avail_bytes", "device", fmt.Sprintf("/dev/sd%d", i), "instance", inst, "job", "node", "mountpoint", fmt.Sprintf("/m%d", i))
			default:
				l = labels.FromStrings("__name__", "node_memory_info", "instance", inst, "job", "node", "slot", fmt.Sprint(i))
			}
			w.lsets = append(w.lsets, l)
			w.kind = append(w.kind, []int{0, 0, 1, 2}[i%4])
			w.values = append(w.values, float64(rand.Intn(1e6)))
		}
	}
	return w
}

// scrape advances every series one scrape and returns the batches, as a
// Prometheus queue manager would shard them (series index mod shards, ≤2000 samples).
func (w *benchWorkload) scrape(ts int64, rng *rand.Rand, batches []Batch) []Batch {
	batches = batches[:0]
	for s := 0; s < w.shards; s++ {
		batches = append(batches, Batch{})
	}
	for i, l := range w.lsets {
		switch w.kind[i] {
		case 0:
			w.values[i] += math.Round(rng.Float64()*1000) / 100
		case 1:
			w.values[i] = math.Round((w.values[i]+rng.NormFloat64()*10)*100) / 100
		}
		b := &batches[i%w.shards]
		b.Series = append(b.Series, BatchSeries{Labels: l, Samples: []Sample{{T: ts, V: w.values[i]}}})
	}
	return batches
}

// openBenchHead opens an empty head for a benchmark: group commit (no fsync
// inside the timed loop) and a clock far past every sample.
func openBenchHead(b *testing.B) *Head {
	b.Helper()
	opts := DefaultOptions()
	opts.WALSyncInterval = 1 << 40
	opts.Now = func() int64 { return 1 << 50 }
	h, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// BenchmarkHeadAppend appends the same node_exporter-like scrapes to tandem's
// head and to Prometheus's tsdb head (both with a WAL) in the same run.
func BenchmarkHeadAppend(b *testing.B) {
	const targets, perTarget, shards, scrapes = 20, 500, 8, 40
	build := func() ([][]Batch, int) {
		w := newBenchWorkload(targets, perTarget, shards)
		rng := rand.New(rand.NewSource(1))
		var all [][]Batch
		n := 0
		for s := 0; s < scrapes; s++ {
			bs := w.scrape(int64(s)*15000, rng, nil)
			// Split into requests of at most 2000 samples.
			for _, bt := range bs {
				for len(bt.Series) > 0 {
					k := min(2000, len(bt.Series))
					all = append(all, []Batch{{Series: bt.Series[:k]}})
					bt.Series = bt.Series[k:]
					n += k
				}
			}
		}
		return all, n
	}
	reqs, samples := build()

	b.Run("tandem", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			h := openBenchHead(b)
			b.StartTimer()
			for _, r := range reqs {
				if res, err := h.AppendBatch(context.Background(), &r[0]); err != nil || res.Err() != nil {
					b.Fatal(err, res.Err())
				}
			}
			b.StopTimer()
			h.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*samples), "ns/sample")
	})
	b.Run("prometheus", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			dir := b.TempDir()
			h := newPromHead(b, dir)
			b.StartTimer()
			for _, r := range reqs {
				app := h.Appender(context.Background())
				for _, s := range r[0].Series {
					for _, smp := range s.Samples {
						if _, err := app.Append(0, s.Labels, smp.T, smp.V); err != nil {
							b.Fatal(err)
						}
					}
				}
				if err := app.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			h.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*samples), "ns/sample")
	})
}

// BenchmarkHeadAppendOutOfOrder compares in-order ingestion with the same
// samples where 10% arrive two scrapes late (out of order, within the window).
func BenchmarkHeadAppendOutOfOrder(b *testing.B) {
	const targets, perTarget, shards, scrapes = 20, 500, 8, 40
	build := func(oooEvery int) ([]Batch, int) {
		w := newBenchWorkload(targets, perTarget, shards)
		rng := rand.New(rand.NewSource(1))
		var reqs []Batch
		held := map[int][]BatchSeries{} // scrape index → delayed series
		n := 0
		for s := 0; s < scrapes; s++ {
			bs := w.scrape(int64(s)*15000, rng, nil)
			for _, bt := range bs {
				var keep []BatchSeries
				for i, ser := range bt.Series {
					if oooEvery > 0 && (i+s)%oooEvery == 0 && s+2 < scrapes {
						held[s+2] = append(held[s+2], ser)
						continue
					}
					keep = append(keep, ser)
				}
				keep = append(keep, held[s]...)
				delete(held, s)
				for len(keep) > 0 {
					k := min(2000, len(keep))
					reqs = append(reqs, Batch{Series: keep[:k]})
					n += k
					keep = keep[k:]
				}
			}
		}
		return reqs, n
	}
	run := func(b *testing.B, reqs []Batch, samples int) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			h := openBenchHead(b)
			b.StartTimer()
			for j := range reqs {
				if res, err := h.AppendBatch(context.Background(), &reqs[j]); err != nil || res.Err() != nil {
					b.Fatal(err, res.Err())
				}
			}
			b.StopTimer()
			if h.counters.appended.Load() != int64(samples) {
				b.Fatalf("%d appended, want %d", h.counters.appended.Load(), samples)
			}
			h.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*samples), "ns/sample")
	}
	inOrder, n1 := build(0)
	ooo, n2 := build(10)
	b.Run("in-order", func(b *testing.B) { run(b, inOrder, n1) })
	b.Run("10pct-out-of-order", func(b *testing.B) { run(b, ooo, n2) })
}

// newPromHead opens Prometheus's own head with a WAL in dir, as its TSDB does.
func newPromHead(b *testing.B, dir string) *promtsdb.Head {
	b.Helper()
	w, err := wlog.New(nil, nil, dir, compression.None)
	if err != nil {
		b.Fatal(err)
	}
	opts := promtsdb.DefaultHeadOptions()
	opts.ChunkDirRoot = dir
	h, err := promtsdb.NewHead(nil, nil, w, nil, opts, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := h.Init(math.MinInt64); err != nil {
		b.Fatal(err)
	}
	return h
}

// BenchmarkCheckpoint writes the WAL checkpoint of a head holding 20
// node_exporter-like targets × 500 series × 240 scrapes (1 h), as after a flush.
func BenchmarkCheckpoint(b *testing.B) {
	h := openBenchHead(b)
	defer h.Close()
	w := newBenchWorkload(20, 500, 8)
	rng := rand.New(rand.NewSource(1))
	var batches []Batch
	for s := 0; s < 240; s++ {
		batches = w.scrape(int64(s)*15000, rng, batches)
		for i := range batches {
			if _, err := h.AppendBatch(context.Background(), &batches[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := h.Checkpoint(0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*20*500*240), "ns/sample")
}

// BenchmarkReplay opens a head whose checkpoint holds 100k series (200
// groups of 500, one sample each): the checkpoint lists series group by
// group in no order of reference, which the index must absorb in O(n log n).
func BenchmarkReplay(b *testing.B) {
	dir := b.TempDir()
	h, err := Open(dir, DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	for g := 0; g < 200; g++ {
		var batch Batch
		for m := 0; m < 500; m++ {
			l := labels.FromStrings("__name__", fmt.Sprint("m", m%50), "instance", fmt.Sprint("i", g), "job", "node", "x", fmt.Sprint(m))
			batch.Series = append(batch.Series, BatchSeries{Labels: l, Samples: []Sample{{T: 1000, V: 1}}})
		}
		if _, err := h.AppendBatch(context.Background(), &batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := h.Checkpoint(0); err != nil {
		b.Fatal(err)
	}
	h.Close()
	for b.Loop() {
		h, err := Open(dir, DefaultOptions())
		if err != nil {
			b.Fatal(err)
		}
		if n := h.index.numSeries(); n != 100_000 {
			b.Fatalf("%d series replayed", n)
		}
		h.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100_000), "ns/series")
}

package tsdb

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/block"
	"github.com/tandem-tsdb/tandem/tsdb/blockset"
	"github.com/tandem-tsdb/tandem/tsdb/starts"
)

// stSeries are the series of writeSTBlocks and the start timestamp of each sample at t.
var stSeries = map[string]func(t int64) int64{
	`{__name__="c"}`: func(t int64) int64 { // a counter restarting at 40 min
		if t >= 40*60000 {
			return 40*60000 - 300
		}
		return -1000
	},
	`{__name__="d"}`: func(t int64) int64 { return t - 15000 }, // deltas
	`{__name__="h"}`: func(t int64) int64 { // a histogram counter, ST unset for a while
		if t >= 30*60000 && t < 50*60000 {
			return 0
		}
		return -5
	},
	`{__name__="n"}`: func(int64) int64 { return 0 },
}

// writeSTBlocks writes two adjacent 1 h blocks of stSeries (15 s apart) into dir.
func writeSTBlocks(t *testing.T, dir string) []string {
	t.Helper()
	c, d, h, n := labels.FromStrings("__name__", "c"), labels.FromStrings("__name__", "d"), labels.FromStrings("__name__", "h"), labels.FromStrings("__name__", "n")
	var dirs []string
	for bi := range int64(2) {
		mint, maxt := bi*3600000, (bi+1)*3600000
		tab := block.Table{}
		cols := []block.Column{{Member: 0}, {Member: 1}, {Member: 2}, {Member: 3}}
		for k := range int32(240) {
			ts := mint + int64(k)*15000
			tab.Timestamps = append(tab.Timestamps, ts)
			for m := range 4 {
				cols[m].Rows = append(cols[m].Rows, k)
			}
			cols[0].Values = append(cols[0].Values, float64(ts/1000))
			cols[1].Values = append(cols[1].Values, 1)
			cols[2].Histograms = append(cols[2].Histograms, &histogram.Histogram{Count: uint64(ts / 15000), Sum: float64(ts),
				PositiveSpans: []histogram.Span{{Offset: 0, Length: 1}}, PositiveBuckets: []int64{ts / 15000}})
			cols[3].Values = append(cols[3].Values, 2)
		}
		tab.Columns = cols
		g := block.Group{Key: "g", Members: []labels.Labels{c, d, h, n}, Tables: []block.Table{tab}}
		var ss []block.SeriesStarts
		for _, l := range []labels.Labels{c, d, h, n} { // label order
			var rs starts.Runs
			prev := int64(math.MinInt64)
			for _, ts := range tab.Timestamps {
				rs.Append(prev, ts, stSeries[l.String()](ts))
				prev = ts
			}
			ss = append(ss, block.SeriesStarts{Labels: l, Runs: rs})
		}
		meta, err := block.Write(dir, mint, maxt, block.Groups([]block.Group{g}), block.WriteOptions{Starts: func(yield func(*block.SeriesStarts) error) error {
			for i := range ss {
				if err := yield(&ss[i]); err != nil {
					return err
				}
			}
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		if meta.Stats.NumStartSeries != 3 {
			t.Fatalf("%d start series, want 3", meta.Stats.NumStartSeries)
		}
		dirs = append(dirs, filepath.Join(dir, meta.ULID))
	}
	return dirs
}

// TestBlockQuerierStarts: the DB's querier and chunk querier give block
// samples their start timestamps, after Seek too, and chunks with start
// timestamps are cut in the encodings that hold them.
func TestBlockQuerierStarts(t *testing.T) {
	dir := t.TempDir()
	writeSTBlocks(t, dir)
	db := openDB(t, dir, func(o *DBOptions) { o.Head.BlockRange = time.Hour })
	defer db.Close()
	q, err := db.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+"))
	nseries := 0
	var it chunkenc.Iterator
	for ss.Next() {
		l := ss.At().Labels().String()
		want := stSeries[l]
		nseries++
		it = ss.At().Iterator(it)
		n := 0
		for it.Next() != chunkenc.ValNone {
			if got := it.AtST(); got != want(it.AtT()) {
				t.Fatalf("%s at %d: st %d, want %d", l, it.AtT(), got, want(it.AtT()))
			}
			n++
		}
		if n != 480 || it.Err() != nil {
			t.Fatalf("%s: %d samples, %v", l, n, it.Err())
		}
		it = ss.At().Iterator(it)
		for _, target := range []int64{50 * 60000, 50 * 60000, 70*60000 + 1, 119 * 60000} {
			if it.Seek(target) == chunkenc.ValNone || it.AtST() != want(it.AtT()) {
				t.Fatalf("%s: after Seek(%d) at %d: st %d, want %d", l, target, it.AtT(), it.AtST(), want(it.AtT()))
			}
		}
	}
	if ss.Err() != nil || nseries != 4 {
		t.Fatalf("%d series, %v", nseries, ss.Err())
	}
	q.Close()

	cq, err := db.ChunkQuerier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	cs := cq.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+"))
	encs := map[chunkenc.Encoding]int{}
	for cs.Next() {
		l := cs.At().Labels().String()
		want := stSeries[l]
		ci := cs.At().Iterator(nil)
		n := 0
		for ci.Next() {
			chk := ci.At().Chunk
			encs[chk.Encoding()]++
			var hasST bool
			ct := chk.Iterator(nil)
			for ct.Next() != chunkenc.ValNone {
				if got := ct.AtST(); got != want(ct.AtT()) {
					t.Fatalf("%s chunk %s at %d: st %d, want %d", l, chk.Encoding(), ct.AtT(), got, want(ct.AtT()))
				}
				hasST = hasST || ct.AtST() != 0
				n++
			}
			if hasST != (chk.Encoding() == chunkenc.EncXOR2 || chk.Encoding() == chunkenc.EncHistogramST) {
				t.Fatalf("%s: %s chunk, start timestamps %v", l, chk.Encoding(), hasST)
			}
		}
		if n != 480 || ci.Err() != nil {
			t.Fatalf("%s: %d samples in chunks, %v", l, n, ci.Err())
		}
	}
	if cs.Err() != nil || encs[chunkenc.EncXOR2] == 0 || encs[chunkenc.EncHistogramST] == 0 || encs[chunkenc.EncXOR] == 0 {
		t.Fatalf("chunk encodings %v, %v", encs, cs.Err())
	}
}

// TestBlockQuerierStartsDamaged: a damaged starts record fails the select, naming the file.
func TestBlockQuerierStartsDamaged(t *testing.T) {
	dirs := writeSTBlocks(t, t.TempDir())
	p := filepath.Join(dirs[0], block.StartsFilename)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[12] ^= 0x40 // inside the first record
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := block.Open(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	q := &blockQuerier{b: &blockset.Block{Block: b}, mint: math.MinInt64, maxt: math.MaxInt64}
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "c"))
	if ss.Next() || ss.Err() == nil || !strings.Contains(ss.Err().Error(), p) {
		t.Fatalf("select over a damaged starts file: %v", ss.Err())
	}
}

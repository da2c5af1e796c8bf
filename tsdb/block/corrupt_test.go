package block

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// exercise opens dir and reads everything; it returns the first error.
func exercise(dir string) (err error) {
	b, err := Open(dir)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Verify(); err != nil {
		return err
	}
	var it chunkenc.Iterator
	for id := 0; id < b.NumSeries(); id++ {
		it = b.Iterator(uint32(id), math.MinInt64, math.MaxInt64, it)
		for it.Next() != chunkenc.ValNone {
		}
		if it.Err() != nil {
			return it.Err()
		}
	}
	// The paths that skip decoding: a seek into the middle of each chunk's
	// rows, and the newest sample from the chunk statistics.
	var sc SeriesScratch
	mid := b.Meta().MinTime + (b.Meta().MaxTime-b.Meta().MinTime)/2
	for id := 0; id < b.NumSeries(); id++ {
		if _, _, err := b.SeriesNewest(uint32(id), mid, math.MaxInt64, &sc); err != nil {
			return err
		}
		it = b.Iterator(uint32(id), mid, math.MaxInt64, it)
		for it.Next() != chunkenc.ValNone {
		}
		if it.Err() != nil {
			return it.Err()
		}
	}
	return nil
}

func TestCorruption(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	tb := genBlock(rng, 4)
	src := t.TempDir()
	meta, err := Write(src, tb.mint, tb.maxt, Groups(tb.groups), WriteOptions{ChunkRows: 50})
	if err != nil {
		t.Fatal(err)
	}
	orig := filepath.Join(src, meta.ULID)
	if err := exercise(orig); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{IndexFilename, ChunksFilename} {
		data, err := os.ReadFile(filepath.Join(orig, file))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 150; i++ {
			dir := t.TempDir()
			for _, f := range []string{MetaFilename, IndexFilename, ChunksFilename} {
				b, _ := os.ReadFile(filepath.Join(orig, f))
				if f == file {
					b = bytes.Clone(data)
					pos := rng.IntN(len(b))
					if i < 10 {
						pos = i // the headers
					} else if i < 30 {
						pos = len(b) - 1 - rng.IntN(min(len(b), 44)) // the TOCs
					}
					b[pos] ^= byte(1 + rng.IntN(255))
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := exercise(dir)
			if err == nil {
				t.Fatalf("%s: corruption %d went unnoticed", file, i)
			}
			if !strings.Contains(err.Error(), filepath.Join(dir, file)) {
				t.Fatalf("%s: error does not name the file: %v", file, err)
			}
		}
		// Truncation.
		dir := t.TempDir()
		for _, f := range []string{MetaFilename, IndexFilename, ChunksFilename} {
			b, _ := os.ReadFile(filepath.Join(orig, f))
			if f == file {
				b = b[:len(b)/2]
			}
			os.WriteFile(filepath.Join(dir, f), b, 0o644)
		}
		if err := exercise(dir); err == nil || !strings.Contains(err.Error(), file) {
			t.Fatalf("%s truncated: %v", file, err)
		}
	}
}

// TestIteratorVerifiesChunks flips a value byte: the iterator reports it when VerifyChunksOnRead is set.
func TestIteratorVerifiesChunks(t *testing.T) {
	g := Group{Key: "g", Members: []labels.Labels{labels.FromStrings("a", "1")},
		Tables: []Table{{Timestamps: []int64{1, 2, 3, 5}, Columns: []Column{{Member: 0, Rows: []int32{0, 1, 2, 3}, Values: []float64{1.5, 2.25, -7, 1e300}}}}}}
	dir := t.TempDir()
	meta, err := Write(dir, 0, 10, Groups([]Group{g}), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bd := filepath.Join(dir, meta.ULID)
	p := filepath.Join(bd, ChunksFilename)
	data, _ := os.ReadFile(p)
	data[len(data)-20-5] ^= 0x10 // inside the last column's data
	os.WriteFile(p, data, 0o644)
	for _, opts := range []OpenOptions{{VerifyChunksOnRead: true}, {}} {
		// Also by default: each chunk's checksum is checked on its first read.
		b, err := OpenWithOptions(bd, opts)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			it := b.Iterator(0, 0, 10, nil)
			if it.Next() != chunkenc.ValNone || it.Err() == nil || !strings.Contains(it.Err().Error(), p) {
				t.Fatalf("iterator over a corrupt chunk (%+v): err %v", opts, it.Err())
			}
		}
		b.Close()
	}
	b, err := Open(bd)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Verify(); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("Verify: %v", err)
	}
}

func seedBlock(f *testing.F) string {
	rng := rand.New(rand.NewPCG(9, 9))
	tb := genBlock(rng, 3)
	dir := f.TempDir()
	meta, err := Write(dir, tb.mint, tb.maxt, Groups(tb.groups), WriteOptions{ChunkRows: 40})
	if err != nil {
		f.Fatal(err)
	}
	return filepath.Join(dir, meta.ULID)
}

func FuzzOpenIndex(f *testing.F) {
	dir := seedBlock(f)
	data, err := os.ReadFile(filepath.Join(dir, IndexFilename))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add([]byte{})
	// The golden index of every version in testdata, each read by its own rules.
	old, err := filepath.Glob(filepath.Join("testdata", "v*", "*", IndexFilename))
	if err != nil || len(old) == 0 {
		f.Fatalf("no golden index files in testdata: %v", err)
	}
	for _, p := range old {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	ms := []*labels.Matcher{
		labels.MustNewMatcher(labels.MatchEqual, "job", "node"),
		labels.MustNewMatcher(labels.MatchNotEqual, "mode", "idle"),
		labels.MustNewMatcher(labels.MatchRegexp, "__name__", "metric_.*"),
		labels.MustNewMatcher(labels.MatchNotRegexp, "idx", "1|2"),
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var sc SeriesScratch
		for _, skip := range []bool{false, true} {
			b, err := openIndexBytes(data, skip)
			if err != nil {
				continue
			}
			for _, m := range ms {
				b.Postings(m)
			}
			b.LabelNames(ms[1])
			b.LabelValues("mode", ms[0])
			for id := 0; id < min(b.NumSeries(), 100); id++ {
				b.Labels(uint32(id))
				b.ChunkStats(uint32(id), math.MinInt64, math.MaxInt64)
				b.SeriesNewest(uint32(id), math.MinInt64, math.MaxInt64, &sc)
				it := b.Iterator(uint32(id), math.MinInt64, math.MaxInt64, nil)
				for it.Next() != chunkenc.ValNone {
				}
				it = b.Iterator(uint32(id), 1000, math.MaxInt64, it)
				for it.Next() != chunkenc.ValNone {
				}
			}
			b.Inspect()
			b.Verify()
		}
	})
}

// chunkBodies returns the bodies of the chunks of a block's chunks file.
func chunkBodies(t testing.TB, dir string) [][]byte {
	data, err := os.ReadFile(filepath.Join(dir, ChunksFilename))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for off := 8; off < len(data)-20; {
		n, k := binary.Uvarint(data[off:])
		out = append(out, data[off+k:off+k+int(n)])
		off += k + int(n) + 4
	}
	return out
}

func FuzzChunk(f *testing.F) {
	for _, b := range chunkBodies(f, seedBlock(f))[:20] {
		f.Add(b, uint16(0))
	}
	// Chunks with histogram columns: of a random block, and one of each kind of column.
	hb := genHistBlock(rand.New(rand.NewPCG(9, 9)), 3)
	dir := f.TempDir()
	meta, err := Write(dir, hb.mint, hb.maxt, Groups(hb.groups), WriteOptions{ChunkRows: 40})
	if err != nil {
		f.Fatal(err)
	}
	for _, b := range chunkBodies(f, filepath.Join(dir, meta.ULID))[:20] {
		f.Add(b, uint16(1))
	}
	var enc chunkEncoder
	rng := rand.New(rand.NewPCG(5, 5))
	body, err := enc.encode(nil, []int64{1, 2, 4}, []colInput{
		{member: 3, rows: []int32{0, 2}, vals: []float64{0.25, 0.5}},
		{member: 4, rows: []int32{0, 1, 2}, hs: genHistograms(rng, 3)},
		{member: 6, rows: []int32{1}, fhs: genFloatHistograms(rng, 1)},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(body, uint16(3))
	f.Fuzz(func(t *testing.T, body []byte, member uint16) {
		ch, err := parseChunk(body)
		if err != nil {
			return
		}
		var cc colCursor
		var cd colDecoder
		var h *histogram.Histogram
		var fh *histogram.FloatHistogram
		budget := 1 << 16
		for i := 0; i < ch.ncols; i++ {
			col, err := ch.column(i)
			if err != nil {
				continue
			}
			cc.reset(ch, col)
			for budget > 0 {
				budget--
				ok, err := cc.next()
				if !ok || err != nil {
					break
				}
				switch col.kind {
				case KindHistogram:
					h = cc.hdec.At(h)
				case KindFloatHistogram:
					fh = cc.fdec.At(fh)
				}
			}
			if col.count <= budget {
				budget -= col.count
				var c Column
				cd.appendTo(ch, col, 0, &c)
				// A seek past the middle rows, decoded in one loop.
				cc.reset(ch, col)
				cc.skipBefore(ch.minT + (ch.maxT-ch.minT)/2)
				for k := 0; k < col.count; k++ {
					if ok, err := cc.next(); !ok || err != nil {
						break
					}
				}
			}
		}
		ch.find(int(member))
	})
}

package block

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/starts"
)

// genSTs returns a start timestamp for each of the (time-ordered) sample
// timestamps ts, of a random pattern: cumulative counters restarting now
// and then, deltas, a mixture with unset stretches, or none at all.
func genSTs(rng *rand.Rand, ts []int64) []int64 {
	sts := make([]int64, len(ts))
	kind := rng.IntN(4)
	var start int64
	for i, t := range ts {
		switch kind {
		case 0: // none
		case 1: // cumulative: a restart every so often, st a bit before the first sample
			if i == 0 || rng.IntN(50) == 0 {
				start = t - 1 - int64(rng.IntN(5000))
			}
			sts[i] = start
		case 2: // deltas: the previous sample's time (and a first one's)
			if i == 0 {
				sts[i] = t - 15000
			} else {
				sts[i] = ts[i-1]
			}
		default: // mixed, with gaps
			switch rng.IntN(8) {
			case 0:
				sts[i] = 0
			case 1:
				start = t - int64(rng.IntN(100))
				sts[i] = start
			case 2:
				sts[i] = t - 1000
			default:
				if start != 0 {
					sts[i] = start
				}
			}
		}
	}
	return sts
}

// buildRuns builds runs from a series' samples and their start timestamps.
func buildRuns(ts, sts []int64) starts.Runs {
	var rs starts.Runs
	prev := int64(math.MinInt64)
	for i, t := range ts {
		rs.Append(prev, t, sts[i])
		prev = t
	}
	return rs
}

// stBlock is a test block with start timestamps for its series.
type stBlock struct {
	*testBlock
	sts   map[string][]int64 // per series, per sample of expected
	input []SeriesStarts     // in label order
}

func genSTBlock(rng *rand.Rand, ngroups int) *stBlock {
	sb := &stBlock{testBlock: genBlock(rng, ngroups), sts: map[string][]int64{}}
	for _, l := range sb.lsets {
		key := l.String()
		ss := sb.expected[key]
		ts := make([]int64, len(ss))
		for i, s := range ss {
			ts[i] = s.t
		}
		sts := genSTs(rng, ts)
		sb.sts[key] = sts
		if rs := buildRuns(ts, sts); rs.HasST() {
			sb.input = append(sb.input, SeriesStarts{Labels: l, Runs: rs})
		}
	}
	return sb
}

func startSlice(ss []SeriesStarts) StartSource {
	return func(yield func(*SeriesStarts) error) error {
		for i := range ss {
			if err := yield(&ss[i]); err != nil {
				return err
			}
		}
		return nil
	}
}

// checkSTs reads every series of b and compares each sample's start timestamp with sb's.
func checkSTs(t *testing.T, b *Block, sb *stBlock) {
	t.Helper()
	var it chunkenc.Iterator
	for id := range uint32(b.NumSeries()) {
		l, err := b.Labels(id)
		if err != nil {
			t.Fatal(err)
		}
		want := sb.sts[l.String()]
		for _, withRuns := range []bool{false, true} {
			if withRuns {
				it = b.IteratorWithStarts(id, b.Starts(l), math.MinInt64, math.MaxInt64, it)
			} else {
				it = b.Iterator(id, math.MinInt64, math.MaxInt64, it)
			}
			i := 0
			for it.Next() != chunkenc.ValNone {
				if got := it.AtST(); got != want[i] {
					t.Fatalf("%s sample %d at %d: st %d, want %d", l, i, it.AtT(), got, want[i])
				}
				i++
			}
			if it.Err() != nil || i != len(want) {
				t.Fatalf("%s: %d samples of %d: %v", l, i, len(want), it.Err())
			}
		}
	}
}

func TestStartsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 21))
	sb := genSTBlock(rng, 6)
	if len(sb.input) < 3 {
		t.Fatalf("only %d series with start timestamps", len(sb.input))
	}
	dir := t.TempDir()
	meta, err := Write(dir, sb.mint, sb.maxt, Groups(sb.groups), WriteOptions{Starts: startSlice(sb.input), ChunkRows: 50})
	if err != nil {
		t.Fatal(err)
	}
	if meta.Stats.NumStartSeries != uint64(len(sb.input)) || meta.Version != FormatVersion {
		t.Fatalf("meta counts %d start series (version %d), want %d", meta.Stats.NumStartSeries, meta.Version, len(sb.input))
	}
	b, err := Open(filepath.Join(dir, meta.ULID))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.NumStartSeries() != len(sb.input) {
		t.Fatalf("block holds %d start series", b.NumStartSeries())
	}
	if err := b.Verify(); err != nil {
		t.Fatal(err)
	}
	for _, ss := range sb.input {
		if got := b.Starts(ss.Labels); !slices.Equal(got, ss.Runs) {
			t.Fatalf("%s: runs %v, want %v", ss.Labels, got, ss.Runs)
		}
	}
	if b.Starts(labels.FromStrings("__name__", "nope")) != nil {
		t.Fatal("runs of an unknown series")
	}
	checkSTs(t, b, sb)

	// The source form round-trips through another Write, byte for byte.
	dir2 := t.TempDir()
	meta2, err := Write(dir2, sb.mint, sb.maxt, Groups(nil), WriteOptions{Starts: b.StartSource(math.MinInt64, math.MaxInt64)})
	if err != nil {
		t.Fatal(err)
	}
	x, _ := os.ReadFile(filepath.Join(dir, meta.ULID, StartsFilename))
	y, _ := os.ReadFile(filepath.Join(dir2, meta2.ULID, StartsFilename))
	if len(x) == 0 || !bytes.Equal(x, y) {
		t.Fatal("rewriting the starts gives other bytes")
	}
	// A clipped source holds what lies in its window only.
	lo, hi := sb.input[0].Runs[0].From, sb.input[0].Runs[0].From+100000
	n := 0
	if err := b.StartSource(lo, hi)(func(ss *SeriesStarts) error {
		n++
		if want := b.Starts(ss.Labels).Clip(lo, hi); !slices.Equal(ss.Runs, want) || ss.Runs[0].From < lo || ss.Runs[len(ss.Runs)-1].To > hi {
			t.Fatalf("%s: clipped runs %v, want %v", ss.Labels, ss.Runs, want)
		}
		return nil
	}); err != nil || n == 0 {
		t.Fatalf("clipped source: %d series, %v", n, err)
	}
}

// TestStartsIteratorSeek: AtST is right after Seek (forward, to the current
// sample, past the end), in windows, and with an iterator reused across series.
func TestStartsIteratorSeek(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 22))
	sb := genSTBlock(rng, 6)
	b := writeTestBlock(t, sb.testBlock, WriteOptions{Starts: startSlice(sb.input), ChunkRows: 40})
	var it chunkenc.Iterator
	checked := 0
	for round := 0; round < 300; round++ {
		id := uint32(rng.IntN(b.NumSeries()))
		l, _ := b.Labels(id)
		exp, sts := sb.expected[l.String()], sb.sts[l.String()]
		if len(exp) == 0 {
			continue
		}
		lo := exp[rng.IntN(len(exp))].t - int64(rng.IntN(3))
		hi := lo + int64(rng.IntN(2000000))
		it = b.Iterator(id, lo, hi, it)
		i := -1 // index in exp of the current sample
		// first returns the index of the first sample at or after from, past i.
		first := func(from int64) int {
			k := i + 1
			for k < len(exp) && (exp[k].t < from || exp[k].t < lo) {
				k++
			}
			return k
		}
		for step := 0; step < 40; step++ {
			var vt chunkenc.ValueType
			if rng.IntN(2) == 0 {
				vt = it.Next()
				i = first(math.MinInt64)
			} else {
				target := lo + int64(rng.IntN(int(hi-lo+1)))
				if rng.IntN(4) == 0 && i >= 0 {
					target = exp[i].t // to the current sample: it stays
				}
				vt = it.Seek(target)
				if i < 0 || exp[i].t < target {
					i = first(target)
				}
			}
			if i >= len(exp) || exp[i].t > hi {
				if vt != chunkenc.ValNone {
					t.Fatalf("%s: sample at %d past the window's end", l, it.AtT())
				}
				break
			}
			if vt == chunkenc.ValNone || it.AtT() != exp[i].t {
				t.Fatalf("%s: at %d, want sample %d at %d", l, it.AtT(), i, exp[i].t)
			}
			for range 2 { // asked twice: the same answer
				if got := it.AtST(); got != sts[i] {
					t.Fatalf("%s sample at %d: st %d, want %d", l, exp[i].t, got, sts[i])
				}
			}
			checked++
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d samples checked", checked)
	}
}

// TestStartsAbsent: without start timestamps there is no file nor count,
// and older blocks read with ST 0.
func TestStartsAbsent(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 23))
	tb := genBlock(rng, 2)
	dir := t.TempDir()
	unset := func(yield func(*SeriesStarts) error) error { // runs without a start timestamp are skipped
		if err := yield(&SeriesStarts{Labels: labels.FromStrings("a", "b")}); err != nil {
			return err
		}
		return yield(&SeriesStarts{Labels: labels.FromStrings("a", "c"), Runs: starts.Runs{{From: tb.mint, To: tb.mint}}})
	}
	for _, src := range []StartSource{nil, unset} {
		meta, err := Write(dir, tb.mint, tb.maxt, Groups(tb.groups), WriteOptions{Starts: src})
		if err != nil {
			t.Fatal(err)
		}
		bd := filepath.Join(dir, meta.ULID)
		if _, err := os.Stat(filepath.Join(bd, StartsFilename)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("starts file without start timestamps: %v", err)
		}
		if mb, _ := os.ReadFile(filepath.Join(bd, MetaFilename)); strings.Contains(string(mb), "numStartSeries") {
			t.Fatalf("meta.json counts start series: %s", mb)
		}
		b, err := Open(bd)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Verify(); err != nil {
			t.Fatal(err)
		}
		if b.NumStartSeries() != 0 || b.Starts(tb.lsets[0]) != nil || b.StartsErr() != nil {
			t.Fatal("start timestamps in a block without")
		}
		b.Close()
	}
	old, err := Open("testdata/v5/01M8TX0V5HGW3XQ5M00000000V")
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	it := old.Iterator(0, math.MinInt64, math.MaxInt64, nil)
	n := 0
	for ; it.Next() != chunkenc.ValNone; n++ {
		if it.AtST() != 0 {
			t.Fatal("a version 5 block gives a start timestamp")
		}
	}
	if n == 0 || old.NumStartSeries() != 0 {
		t.Fatalf("version 5 block: %d samples, %d start series", n, old.NumStartSeries())
	}
}

func TestStartsWriteValidation(t *testing.T) {
	l1, l2 := labels.FromStrings("a", "1"), labels.FromStrings("a", "2")
	run := func(from, to int64) starts.Run { return starts.Run{From: from, To: to, V: 1} }
	for name, ss := range map[string][]SeriesStarts{
		"unsorted series":  {{Labels: l2, Runs: starts.Runs{run(1, 2)}}, {Labels: l1, Runs: starts.Runs{run(1, 2)}}},
		"repeated series":  {{Labels: l1, Runs: starts.Runs{run(1, 2)}}, {Labels: l1, Runs: starts.Runs{run(3, 4)}}},
		"before the range": {{Labels: l1, Runs: starts.Runs{run(-1, 2)}}},
		"at the end":       {{Labels: l1, Runs: starts.Runs{run(50, 100)}}},
		"overlapping runs": {{Labels: l1, Runs: starts.Runs{run(1, 5), run(5, 6)}}},
		"runs going back":  {{Labels: l1, Runs: starts.Runs{run(10, 12), run(1, 2)}}},
		"inverted run":     {{Labels: l1, Runs: starts.Runs{run(5, 4)}}},
		"unknown kind":     {{Labels: l1, Runs: starts.Runs{{From: 1, To: 2, Kind: 7, V: 1}}}},
		"bad labels":       {{Labels: labels.FromStrings("", "x"), Runs: starts.Runs{run(1, 2)}}},
	} {
		dir := t.TempDir()
		if _, err := Write(dir, 0, 100, Groups(nil), WriteOptions{Starts: startSlice(ss)}); err == nil {
			t.Errorf("%s: written", name)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%s: a failed write left %v", name, ents)
		}
	}
}

// TestStartsCorruption flips bytes of the starts file: Open, Verify or a
// read of the start timestamps reports it, naming the file.
func TestStartsCorruption(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 24))
	sb := genSTBlock(rng, 3)
	src := t.TempDir()
	meta, err := Write(src, sb.mint, sb.maxt, Groups(sb.groups), WriteOptions{Starts: startSlice(sb.input)})
	if err != nil {
		t.Fatal(err)
	}
	orig := filepath.Join(src, meta.ULID)
	files := []string{MetaFilename, IndexFilename, ChunksFilename, StartsFilename}
	// check reads the block as a query would: without Verify, through iterators.
	check := func(dir string, verify bool) error {
		b, err := Open(dir)
		if err != nil {
			return err
		}
		defer b.Close()
		if verify {
			return b.Verify()
		}
		var it chunkenc.Iterator
		for id := range uint32(b.NumSeries()) {
			it = b.Iterator(id, math.MinInt64, math.MaxInt64, it)
			for it.Next() != chunkenc.ValNone {
			}
			if it.Err() != nil {
				return it.Err()
			}
		}
		return b.StartSource(math.MinInt64, math.MaxInt64)(func(*SeriesStarts) error { return nil })
	}
	for _, v := range []bool{false, true} {
		if err := check(orig, v); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(filepath.Join(orig, StartsFilename))
	if err != nil {
		t.Fatal(err)
	}
	damaged := func(mod func([]byte) []byte) string {
		dir := t.TempDir()
		for _, f := range files {
			b, _ := os.ReadFile(filepath.Join(orig, f))
			if f == StartsFilename {
				if b = mod(bytes.Clone(b)); b == nil {
					continue
				}
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	for i := 0; i < 300; i++ {
		pos := rng.IntN(len(data))
		switch {
		case i < 10:
			pos = i // the header
		case i < 40:
			pos = len(data) - 1 - rng.IntN(startsTOCLen+8) // the TOC and the last record's CRC
		}
		dir := damaged(func(b []byte) []byte { b[pos] ^= byte(1 + rng.IntN(255)); return b })
		for _, v := range []bool{false, true} {
			err := check(dir, v)
			if err == nil {
				t.Fatalf("corruption at %d went unnoticed (verify %v)", pos, v)
			}
			if !strings.Contains(err.Error(), filepath.Join(dir, StartsFilename)) {
				t.Fatalf("corruption at %d: error does not name the file: %v", pos, err)
			}
		}
		// Record damage is found when the file is decoded, not at Open.
		if pos >= startsHeaderLen && pos < len(data)-startsTOCLen {
			b, err := Open(dir)
			if err != nil {
				t.Fatalf("record corruption at %d fails Open: %v", pos, err)
			}
			if b.StartsErr() == nil || b.Starts(sb.input[0].Labels) != nil {
				t.Fatalf("record corruption at %d: runs still served", pos)
			}
			b.Close()
		}
	}
	for name, mod := range map[string]func([]byte) []byte{
		"truncated": func(b []byte) []byte { return b[:len(b)/2] },
		"missing":   func([]byte) []byte { return nil },
		"empty":     func([]byte) []byte { return []byte{} },
	} {
		dir := damaged(mod)
		if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), StartsFilename) {
			t.Fatalf("%s starts file: Open: %v", name, err)
		}
	}
	// A starts file that meta.json does not count.
	dir := damaged(func(b []byte) []byte { return b })
	mp := filepath.Join(dir, MetaFilename)
	mb, _ := os.ReadFile(mp)
	mb = bytes.Replace(mb, []byte(`"numStartSeries"`), []byte(`"numStartSeriesX"`), 1)
	if err := os.WriteFile(mp, mb, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), StartsFilename) {
		t.Fatalf("uncounted starts file: Open: %v", err)
	}
}

// TestStartsHashCollision: series sharing a label hash are told apart by their labels.
func TestStartsHashCollision(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 25))
	sb := genSTBlock(rng, 4)
	b := writeTestBlock(t, sb.testBlock, WriteOptions{Starts: startSlice(sb.input)})
	idx, err := b.loadStarts()
	if err != nil || len(idx.entries) < 3 || len(sb.input) != len(idx.entries) {
		t.Fatalf("%v, %d entries", err, len(idx.entries))
	}
	// Every entry under the first one's hash, as if all collided, the first one last.
	h := sb.input[0].Labels.Hash()
	for i := range idx.entries {
		idx.entries[i].hash = h
		idx.byHash[i] = uint32(len(idx.entries) - 1 - i)
	}
	if got := b.Starts(sb.input[0].Labels); !slices.Equal(got, sb.input[0].Runs) {
		t.Fatalf("a series behind colliding ones: %v, want %v", got, sb.input[0].Runs)
	}
	if got := b.Starts(sb.input[1].Labels); got != nil {
		t.Fatal("a series found under another's hash") // its own hash is gone
	}
	// A series that differs from a colliding one in a value only is not it.
	other := labels.NewBuilder(sb.input[0].Labels).Set("job", "other").Labels()
	for i := range idx.entries {
		idx.entries[i].hash = other.Hash()
	}
	if got := b.Starts(other); got != nil {
		t.Fatalf("colliding labels %s taken for another series", other)
	}
}

func FuzzStarts(f *testing.F) {
	rng := rand.New(rand.NewPCG(26, 26))
	sb := genSTBlock(rng, 2)
	dir := f.TempDir()
	meta, err := Write(dir, sb.mint, sb.maxt, Groups(sb.groups), WriteOptions{Starts: startSlice(sb.input)})
	if err != nil {
		f.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, meta.ULID, StartsFilename))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, skip := range []bool{false, true} {
			b, err := openStartsBytes(data, skip)
			if err != nil {
				continue
			}
			var prev labels.Labels
			n := 0
			err = b.StartSource(math.MinInt64, math.MaxInt64)(func(ss *SeriesStarts) error {
				if n > 0 && labels.Compare(prev, ss.Labels) >= 0 {
					t.Fatalf("series %s out of order", ss.Labels)
				}
				if err := validRuns(ss.Runs, math.MinInt64, math.MaxInt64); err != nil || !ss.Runs.HasST() {
					t.Fatalf("series %s: bad runs served: %v", ss.Labels, err)
				}
				if got := b.Starts(ss.Labels); !slices.Equal(got, ss.Runs) {
					t.Fatalf("series %s: lookup differs from the source", ss.Labels)
				}
				prev = ss.Labels
				n++
				return nil
			})
			if err == nil && n != b.NumStartSeries() {
				t.Fatalf("%d series served, TOC counts %d", n, b.NumStartSeries())
			}
		}
	})
}

package block

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// setVersion rewrites the format version of a block's meta.json and the
// headers of its binary files.
func setVersion(t *testing.T, dir string, v int) {
	t.Helper()
	mp := filepath.Join(dir, MetaFilename)
	b, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["version"] = v
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ChunksFilename, IndexFilename} {
		p := filepath.Join(dir, f)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[4] = byte(v)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFormatVersions: a version this code does not know is refused (older
// versions: TestReadsVersion2).
func TestFormatVersions(t *testing.T) {
	g := Group{
		Key:     "g",
		Members: []labels.Labels{labels.FromStrings("__name__", "a")},
		Tables: []Table{{
			Timestamps: []int64{1000, 2000, 3000},
			Columns:    []Column{{Member: 0, Rows: []int32{0, 1, 2}, Values: []float64{0.5, 1.25, 2.75}}},
		}},
	}
	read := func(dir string) ([][2]float64, error) {
		b, err := Open(dir)
		if err != nil {
			return nil, err
		}
		defer b.Close()
		var out [][2]float64
		it := b.Iterator(0, math.MinInt64, math.MaxInt64, nil)
		for it.Next() == chunkenc.ValFloat {
			ts, v := it.At()
			out = append(out, [2]float64{float64(ts), v})
		}
		return out, it.Err()
	}
	root := t.TempDir()
	meta, err := Write(root, 0, 10000, Groups([]Group{g}), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, meta.ULID)
	want, err := read(dir)
	if err != nil || len(want) != 3 {
		t.Fatalf("read back: %v %v", want, err)
	}
	setVersion(t, dir, FormatVersion+1)
	if _, err := read(dir); err == nil {
		t.Fatal("a block of an unknown, newer version was opened")
	}
}

// v2Groups is the content of testdata/v2: a block that version 2 of the
// writer made (aligned and unaligned groups; constant, decimal and XOR
// columns; a gap).
func v2Groups() []Group {
	ts := make([]int64, 300)
	for i := range ts {
		ts[i] = 1_700_000_000_000 + int64(i)*15000
	}
	col := func(m int, f func(i int) (float64, bool)) Column {
		c := Column{Member: m}
		for i := range ts {
			if v, ok := f(i); ok {
				c.Rows = append(c.Rows, int32(i))
				c.Values = append(c.Values, v)
			}
		}
		return c
	}
	g1 := Group{
		Key: `instance="a",job="node"`,
		Members: []labels.Labels{
			labels.FromStrings("__name__", "up", "instance", "a", "job", "node"),
			labels.FromStrings("__name__", "mem_bytes", "instance", "a", "job", "node"),
			labels.FromStrings("__name__", "cpu_seconds_total", "cpu", "0", "instance", "a", "job", "node", "mode", "idle"),
			labels.FromStrings("__name__", "temp", "instance", "a", "job", "node"),
		},
		Tables: []Table{{Timestamps: ts, Columns: []Column{
			col(0, func(int) (float64, bool) { return 1, true }),
			col(1, func(i int) (float64, bool) { return float64(4096 * (1000 + i*i%97)), true }),
			col(2, func(i int) (float64, bool) { return 100 + float64(i)*9.75, i%50 != 7 }),
			col(3, func(i int) (float64, bool) { return 20 + float64(i)/3, true }),
		}}},
	}
	g2 := Group{
		Key:     `instance="b",job="other"`,
		Members: []labels.Labels{labels.FromStrings("__name__", "up", "instance", "b", "job", "other")},
		Tables:  []Table{{Timestamps: make([]int64, 100), Columns: []Column{{Member: 0, Rows: make([]int32, 100), Values: make([]float64, 100)}}}},
	}
	for i := range 100 {
		g2.Tables[0].Timestamps[i] = 1_700_000_000_007 + int64(i)*60000
		g2.Tables[0].Columns[0].Rows[i] = int32(i)
		g2.Tables[0].Columns[0].Values[i] = 1
	}
	return []Group{g1, g2}
}

// TestReadsOlderVersions: blocks written by versions 2 (symbol references by
// offset, unstepped decimals) and 3 (fixed-width decimal residuals) of the
// format read exactly as the same data written now.
func TestReadsOlderVersions(t *testing.T) {
	for v, dir := range map[int]string{2: "testdata/v2/01M8Q5KW51HZ9576PREYA3YHPG", 3: "testdata/v3/01M8QBJEA45RGYAT87JCP519P6"} {
		t.Run(fmt.Sprint("v", v), func(t *testing.T) { testReadsOlder(t, dir, v) })
	}
}

func testReadsOlder(t *testing.T, dir string, version int) {
	old, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if v := old.Meta().Version; v != version {
		t.Fatalf("testdata block version %d", v)
	}
	root := t.TempDir()
	meta, err := Write(root, 1_700_000_000_000, 1_700_007_200_000, Groups(v2Groups()), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur, err := Open(filepath.Join(root, meta.ULID))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if err := old.Verify(); err != nil {
		t.Fatal(err)
	}
	if old.NumSeries() != cur.NumSeries() || old.NumSeries() != 5 {
		t.Fatalf("series: %d and %d", old.NumSeries(), cur.NumSeries())
	}
	for _, name := range []string{"__name__", "instance", "job", "cpu", "mode"} {
		a, err1 := old.LabelValues(name)
		b, err2 := cur.LabelValues(name)
		if err1 != nil || err2 != nil || !slices.Equal(a, b) || len(a) == 0 {
			t.Fatalf("label values of %s: %v %v (%v %v)", name, a, b, err1, err2)
		}
	}
	m := labels.MustNewMatcher(labels.MatchRegexp, "__name__", "up|mem_bytes")
	pa, err1 := old.Postings(m)
	pb, err2 := cur.Postings(m)
	if err1 != nil || err2 != nil || !slices.Equal(pa, pb) || len(pa) != 3 {
		t.Fatalf("postings: %v %v (%v %v)", pa, pb, err1, err2)
	}
	for id := range uint32(old.NumSeries()) {
		la, err1 := old.Labels(id)
		lb, err2 := cur.Labels(id)
		if err1 != nil || err2 != nil || !labels.Equal(la, lb) {
			t.Fatalf("series %d: %s and %s (%v %v)", id, la, lb, err1, err2)
		}
		a, err1 := collect(old.Iterator(id, math.MinInt64, math.MaxInt64, nil))
		b, err2 := collect(cur.Iterator(id, math.MinInt64, math.MaxInt64, nil))
		if err1 != nil || err2 != nil || len(a) < 100 {
			t.Fatalf("%s: %d samples, %v %v", la, len(a), err1, err2)
		}
		equalSamples(t, la.String(), a, b)
	}
}

// TestReadsGoldenV4 reads testdata/v4, written by version 4 of the writer
// from v4Groups with ChunkRows 128, and compares every series and group with
// that input.
func TestReadsGoldenV4(t *testing.T) {
	testGolden(t, "testdata/v4/01M8QG5V4G7K9RMXW0000000V4", 4, v4Groups())
}

// TestReadsGoldenV5 reads testdata/v5, written by version 5 of the writer
// from v5Groups with ChunkRows 128 (native histogram columns), and compares
// every series and group with that input.
func TestReadsGoldenV5(t *testing.T) {
	testGolden(t, "testdata/v5/01M8TX0V5HGW3XQ5M00000000V", 5, v5Groups())
}

// TestReadsGoldenV6 reads testdata/v6 (v5Groups with v6Starts, the starts
// file): the samples as testGolden checks them, and every sample's start
// timestamp and every series' runs as written.
func TestReadsGoldenV6(t *testing.T) {
	dir := "testdata/v6/01M8TX0V6STARTS000000000V6"
	gs := v5Groups()
	testGolden(t, dir, 6, gs)
	want, sts := v6Starts(gs)
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.NumStartSeries() != len(want) || len(want) != 4 {
		t.Fatalf("%d start series, want %d", b.NumStartSeries(), len(want))
	}
	for _, ss := range want {
		if got := b.Starts(ss.Labels); !slices.Equal(got, ss.Runs) {
			t.Fatalf("%s: runs %v, want %v", ss.Labels, got, ss.Runs)
		}
	}
	nonzero := 0
	for id := range uint32(b.NumSeries()) {
		l, _ := b.Labels(id)
		it := b.Iterator(id, math.MinInt64, math.MaxInt64, nil)
		i := 0
		for ; it.Next() != chunkenc.ValNone; i++ {
			if got, w := it.AtST(), sts[l.String()][i]; got != w {
				t.Fatalf("%s sample %d: st %d, want %d", l, i, got, w)
			}
			if it.AtST() != 0 {
				nonzero++
			}
		}
		if it.Err() != nil || i != len(sts[l.String()]) {
			t.Fatalf("%s: %d samples: %v", l, i, it.Err())
		}
	}
	if nonzero < 500 {
		t.Fatalf("only %d samples with a start timestamp", nonzero)
	}
}

// TestReadsGoldenV7 reads testdata/v7, written by version 7 of the writer
// from v5Groups with ChunkRows 128 (series records by stride and length,
// postings runs, directories without members), and compares every series
// and group with that input.
func TestReadsGoldenV7(t *testing.T) {
	testGolden(t, "testdata/v7/01M8TX0V7C0MPACT00000000V7", 7, v5Groups())
}

// testGolden opens the block in dir, checks its version and that every
// series' samples (Iterator) and every group (ReadGroup) equal gs's.
func testGolden(t *testing.T, dir string, version int, gs []Group) {
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if v := b.Meta().Version; v != version {
		t.Fatalf("testdata block version %d, want %d", v, version)
	}
	if err := b.Verify(); err != nil {
		t.Fatal(err)
	}
	want := map[string][]hsample{}
	n := 0
	for gi := range gs {
		g := &gs[gi]
		for m, l := range g.Members {
			want[l.String()] = groupAllSamples(g, m)
			n++
		}
		var got Group
		if ok, err := b.ReadGroup(g.Key, &got); !ok || err != nil {
			t.Fatalf("ReadGroup(%q) = %v, %v", g.Key, ok, err)
		}
		for m := range g.Members {
			if !labels.Equal(got.Members[m], g.Members[m]) {
				t.Fatalf("group %q member %d: %s, want %s", g.Key, m, got.Members[m], g.Members[m])
			}
			equalHSamples(t, fmt.Sprintf("group %q member %d", g.Key, m), groupAllSamples(&got, m), groupAllSamples(g, m))
		}
	}
	if b.NumSeries() != n {
		t.Fatalf("%d series, want %d", b.NumSeries(), n)
	}
	for id := range uint32(b.NumSeries()) {
		l, err := b.Labels(id)
		if err != nil {
			t.Fatal(err)
		}
		got, err := collectAll(b.Iterator(id, math.MinInt64, math.MaxInt64, nil))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			t.Fatalf("%s: no samples", l)
		}
		equalHSamples(t, l.String(), got, want[l.String()])
	}
}

// goldenOfVersion is the golden block the writer of each format version
// makes from v5Groups (ChunkRows 128).
var goldenOfVersion = map[int]string{7: "testdata/v7/01M8TX0V7C0MPACT00000000V7"}

// TestWriterReproducesGolden writes v5Groups again and compares the index
// and chunk files byte for byte with the golden block of the current
// version: a change of how the writer builds them (the index's posting
// lists, its sections) must not change what it writes.
func TestWriterReproducesGolden(t *testing.T) {
	golden, ok := goldenOfVersion[FormatVersion]
	if !ok {
		t.Fatalf("no golden block of version %d: add one (and its TestReadsGolden)", FormatVersion)
	}
	var want Meta
	if b, err := os.ReadFile(filepath.Join(golden, MetaFilename)); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	meta, err := Write(root, want.MinTime, want.MaxTime, Groups(v5Groups()), WriteOptions{ULID: want.ULID, ChunkRows: 128})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"index", "chunks"} {
		got, err := os.ReadFile(filepath.Join(root, meta.ULID, f))
		if err != nil {
			t.Fatal(err)
		}
		w, err := os.ReadFile(filepath.Join(golden, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, w) {
			t.Fatalf("%s: %d bytes differ from the golden's %d", f, len(got), len(w))
		}
	}
}

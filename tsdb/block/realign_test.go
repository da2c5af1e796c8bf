package block

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// TestRealign writes groups whose members arrived unaligned and checks that
// members sampled at the group's instants are folded into one table while
// members with timestamps of their own are not, and that every series reads
// back exactly as written.
func TestRealign(t *testing.T) {
	ts := func(n int, off int64) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(i)*15000 + off
		}
		return out
	}
	col := func(m int, rows []int32, v0 float64) Column {
		c := Column{Member: m, Rows: rows}
		for i := range rows {
			c.Values = append(c.Values, v0+float64(i))
		}
		return c
	}
	all := func(n int) []int32 {
		r := make([]int32, n)
		for i := range r {
			r[i] = int32(i)
		}
		return r
	}
	g := Group{
		Key: "g",
		Members: []labels.Labels{
			labels.FromStrings("__name__", "a"), labels.FromStrings("__name__", "b"),
			labels.FromStrings("__name__", "c"), labels.FromStrings("__name__", "d"),
			labels.FromStrings("__name__", "e"),
		},
		Tables: []Table{
			// The shared table holds a's first 10 rows only.
			{Timestamps: ts(10, 0), Columns: []Column{col(0, all(10), 0)}},
			// d is jittered: its own table stays, although it is as large as
			// the others and comes first.
			{Timestamps: ts(100, 3), Columns: []Column{col(3, all(100), 300)}},
			// a's later samples, b and c: unaligned but at the group's instants.
			{Timestamps: ts(100, 0)[10:], Columns: []Column{col(0, all(90), 10)}},
			{Timestamps: ts(100, 0), Columns: []Column{col(1, all(100), 100)}},
			{Timestamps: ts(100, 0), Columns: []Column{col(2, []int32{0, 5, 7, 50, 99}, 200)}},
			// e has a single sample at an instant the others share.
			{Timestamps: []int64{45000}, Columns: []Column{col(4, []int32{0}, 400)}},
		},
	}
	want := map[string][][2]float64{}
	for _, tb := range g.Tables {
		for _, c := range tb.Columns {
			n := g.Members[c.Member].Get("__name__")
			for i, r := range c.Rows {
				want[n] = append(want[n], [2]float64{float64(tb.Timestamps[r]), c.Values[i]})
			}
		}
	}
	rg := realign(&g)
	if len(rg.Tables) != 2 {
		t.Fatalf("realigned into %d tables, want 2 (shared + the jittered member)", len(rg.Tables))
	}
	if n := len(rg.Tables[0].Columns); n != 4 {
		t.Errorf("shared table has %d columns, want 4", n)
	}
	if len(g.Tables) != 6 || len(g.Tables[0].Columns[0].Rows) != 10 || len(g.Tables[1].Timestamps) != 100 {
		t.Fatal("realign modified its input")
	}

	dir := t.TempDir()
	meta, err := Write(dir, 0, 100*15000, Groups([]Group{g}), WriteOptions{ChunkRows: 32})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(filepath.Join(dir, meta.ULID))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ins, err := b.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ins.Groups[0].Tables); n != 2 {
		t.Errorf("block group has %d tables, want 2", n)
	}
	var it chunkenc.Iterator
	for id := 0; id < b.NumSeries(); id++ {
		l, err := b.Labels(uint32(id))
		if err != nil {
			t.Fatal(err)
		}
		n := l.Get("__name__")
		var got [][2]float64
		it = b.Iterator(uint32(id), math.MinInt64, math.MaxInt64, it)
		for it.Next() == chunkenc.ValFloat {
			tt, v := it.At()
			got = append(got, [2]float64{float64(tt), v})
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want[n]) {
			t.Fatalf("%s: %d samples, want %d", n, len(got), len(want[n]))
		}
		for i := range got {
			if got[i] != want[n][i] {
				t.Fatalf("%s sample %d: %v, want %v", n, i, got[i], want[n][i])
			}
		}
	}
}

// TestRealignKeepsCollisions leaves a table alone when folding it would put
// two values of one member on one row.
func TestRealignKeepsCollisions(t *testing.T) {
	g := Group{
		Key:     "g",
		Members: []labels.Labels{labels.FromStrings("__name__", "a")},
		Tables: []Table{
			{Timestamps: []int64{1, 2, 3}, Columns: []Column{{Member: 0, Rows: []int32{0, 1, 2}, Values: []float64{1, 2, 3}}}},
			{Timestamps: []int64{2}, Columns: []Column{{Member: 0, Rows: []int32{0}, Values: []float64{9}}}},
		},
	}
	if rg := realign(&g); len(rg.Tables) != 2 {
		t.Fatalf("folded a colliding table: %d tables", len(rg.Tables))
	}
}

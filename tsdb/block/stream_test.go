package block

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// streamChunks writes the groups of src through the chunk-level GroupWriter calls, splitting tables as Write does.
func streamChunks(gw *GroupWriter, gs []Group) error {
	for gi := range gs {
		g := &gs[gi]
		if err := gw.BeginGroup(g.Key, g.Members); err != nil {
			return err
		}
		for ti := range g.Tables {
			tb := &g.Tables[ti]
			if err := gw.BeginTable(); err != nil {
				return err
			}
			cols := slices.Clone(tb.Columns)
			slices.SortFunc(cols, func(a, b Column) int { return a.Member - b.Member })
			for r0, r1 := 0, 0; r0 < len(tb.Timestamps); r0 = r1 {
				r1 = gw.ChunkEnd(r0, len(tb.Timestamps))
				if err := gw.BeginChunk(tb.Timestamps[r0:r1]); err != nil {
					return err
				}
				for _, c := range cols {
					var rows []int32
					var vals []float64
					for i, r := range c.Rows {
						if int(r) >= r0 && int(r) < r1 {
							rows, vals = append(rows, r-int32(r0)), append(vals, c.Values[i])
						}
					}
					if len(rows) > 0 {
						if err := gw.AddColumn(c.Member, rows, vals); err != nil {
							return err
						}
					}
				}
				if err := gw.EndChunk(); err != nil {
					return err
				}
			}
		}
		if err := gw.EndGroup(); err != nil {
			return err
		}
	}
	return nil
}

func readFiles(t *testing.T, dir string) [2][]byte {
	t.Helper()
	var out [2][]byte
	for i, f := range []string{ChunksFilename, IndexFilename} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// TestWriteStream writes random groups chunk by chunk and table by table: the blocks are byte for byte
// the same, and ReadGroupChunks with a ChunkReader reads back what ReadGroup does.
func TestWriteStream(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		tb := genBlock(rand.New(rand.NewPCG(seed, 11)), 6)
		opts := WriteOptions{ChunkRows: 50}
		dir := t.TempDir()
		m1, err := WriteStream(dir, tb.mint, tb.maxt, func(gw *GroupWriter) error { return streamChunks(gw, tb.groups) }, opts)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := WriteStream(dir, tb.mint, tb.maxt, func(gw *GroupWriter) error {
			for gi := range tb.groups {
				g := &tb.groups[gi]
				if err := gw.BeginGroup(g.Key, g.Members); err != nil {
					return err
				}
				for ti := range g.Tables {
					if err := gw.WriteTable(&g.Tables[ti]); err != nil {
						return err
					}
				}
				if err := gw.EndGroup(); err != nil {
					return err
				}
			}
			return nil
		}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if m1.Stats != m2.Stats {
			t.Fatalf("stats %+v and %+v", m1.Stats, m2.Stats)
		}
		f1, f2 := readFiles(t, filepath.Join(dir, m1.ULID)), readFiles(t, filepath.Join(dir, m2.ULID))
		if !bytes.Equal(f1[0], f2[0]) || !bytes.Equal(f1[1], f2[1]) {
			t.Fatal("chunk by chunk and table by table wrote different blocks")
		}
		b, err := Open(filepath.Join(dir, m1.ULID))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if err := b.Verify(); err != nil {
			t.Fatal(err)
		}
		for id := 0; id < b.NumSeries(); id++ {
			l, _ := b.Labels(uint32(id))
			got, err := collect(b.Iterator(uint32(id), tb.mint, tb.maxt, nil))
			if err != nil {
				t.Fatal(err)
			}
			equalSamples(t, l.String(), got, tb.expected[l.String()])
		}
		keys, _ := b.GroupKeys()
		var gc GroupChunks
		var rd ChunkReader
		for _, k := range keys {
			want, ok, err := b.Group(k)
			if !ok || err != nil {
				t.Fatal(ok, err)
			}
			if ok, err := b.ReadGroupChunks(k, &gc); !ok || err != nil {
				t.Fatal(ok, err)
			}
			if gc.Key != k || !reflect.DeepEqual(gc.Members, want.Members) || len(gc.Tables) != len(want.Tables) {
				t.Fatalf("group %s: ReadGroupChunks %d members %d tables, ReadGroup %d and %d", k, len(gc.Members), len(gc.Tables), len(want.Members), len(want.Tables))
			}
			for ti, cs := range gc.Tables {
				got := Table{}
				for _, c := range cs {
					if err := rd.Reset(b, c); err != nil {
						t.Fatal(err)
					}
					base := int32(len(got.Timestamps))
					got.Timestamps = append(got.Timestamps, rd.Timestamps()...)
					for i := range rd.NumColumns() {
						m := rd.Member(i)
						if rd.Find(m) != i {
							t.Fatalf("Find(%d) = %d, want %d", m, rd.Find(m), i)
						}
						ci := slices.IndexFunc(got.Columns, func(c Column) bool { return c.Member == m })
						if ci < 0 {
							ci = len(got.Columns)
							got.Columns = append(got.Columns, Column{Member: m})
						}
						c := &got.Columns[ci]
						r0 := len(c.Rows)
						if c.Rows, c.Values, err = rd.AppendColumn(i, c.Rows, c.Values); err != nil {
							t.Fatal(err)
						}
						for j := r0; j < len(c.Rows); j++ {
							c.Rows[j] += base
						}
					}
				}
				slices.SortFunc(got.Columns, func(a, b Column) int { return a.Member - b.Member })
				w := want.Tables[ti]
				if !slices.Equal(got.Timestamps, w.Timestamps) || len(got.Columns) != len(w.Columns) {
					t.Fatalf("group %s table %d: %d rows %d columns, ReadGroup %d and %d", k, ti, len(got.Timestamps), len(got.Columns), len(w.Timestamps), len(w.Columns))
				}
				for ci := range got.Columns {
					g, w := got.Columns[ci], w.Columns[ci]
					if g.Member != w.Member || !slices.Equal(g.Rows, w.Rows) || !slices.EqualFunc(g.Values, w.Values, sameBits) {
						t.Fatalf("group %s table %d column %d differs from ReadGroup's", k, ti, ci)
					}
				}
			}
		}
		if ok, err := b.ReadGroupChunks("no such group", &gc); ok || err != nil {
			t.Fatalf("ReadGroupChunks of a missing group: %v, %v", ok, err)
		}
	}
}

// TestGroupWriterChecks checks that GroupWriter refuses what Write refuses and calls out of order.
func TestGroupWriterChecks(t *testing.T) {
	x, y := labels.FromStrings("__name__", "x"), labels.FromStrings("__name__", "y")
	ms := []labels.Labels{x, y}
	const mint, maxt = 1000, 2000
	cases := []struct {
		name string
		want string
		fn   func(gw *GroupWriter) error
	}{
		{"chunk before table", "out of order", func(gw *GroupWriter) error {
			gw.BeginGroup("g", ms)
			return gw.BeginChunk([]int64{1000})
		}},
		{"two groups open", "not ended", func(gw *GroupWriter) error {
			gw.BeginGroup("g", ms)
			return gw.BeginGroup("h", ms)
		}},
		{"group left open", "not ended", func(gw *GroupWriter) error {
			gw.BeginGroup("g", ms)
			return nil
		}},
		{"timestamp out of range", "outside", func(gw *GroupWriter) error {
			gw.BeginGroup("g", ms)
			gw.BeginTable()
			return gw.BeginChunk([]int64{1000, 2000})
		}},
		{"chunk before the previous one", "not strictly increasing", func(gw *GroupWriter) error {
			gw.BeginGroup("g", ms)
			gw.BeginTable()
			gw.BeginChunk([]int64{1000, 1010})
			if err := gw.AddColumn(0, []int32{1}, []float64{1}); err != nil {
				return err
			}
			gw.EndChunk()
			return gw.BeginChunk([]int64{1010})
		}},
		{"members out of order", "member 0 after 1", func(gw *GroupWriter) error {
			gw.BeginGroup("g", ms)
			gw.BeginTable()
			gw.BeginChunk([]int64{1000})
			gw.AddColumn(1, []int32{0}, []float64{1})
			return gw.AddColumn(0, []int32{0}, []float64{1})
		}},
		{"member out of range", "member 2 after -1 of 2", func(gw *GroupWriter) error {
			gw.BeginGroup("g", ms)
			gw.BeginTable()
			gw.BeginChunk([]int64{1000})
			return gw.AddColumn(2, []int32{0}, []float64{1})
		}},
		{"row beyond the chunk", "bad row 1", func(gw *GroupWriter) error {
			gw.BeginGroup("g", ms)
			gw.BeginTable()
			gw.BeginChunk([]int64{1000})
			return gw.AddColumn(0, []int32{1}, []float64{1})
		}},
		{"rows and values", "1 rows but 2 values", func(gw *GroupWriter) error {
			gw.BeginGroup("g", ms)
			gw.BeginTable()
			gw.BeginChunk([]int64{1000})
			return gw.AddColumn(0, []int32{0}, []float64{1, 2})
		}},
		{"bad table", "bad or repeated member", func(gw *GroupWriter) error {
			gw.BeginGroup("g", ms)
			return gw.WriteTable(&Table{Timestamps: []int64{1000}, Columns: []Column{{Member: 0, Rows: []int32{0}, Values: []float64{1}}, {Member: 0}}})
		}},
	}
	for _, c := range cases {
		dir := t.TempDir()
		_, err := WriteStream(dir, mint, maxt, c.fn, WriteOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: err %v, want %q", c.name, err, c.want)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Fatalf("%s: failed write left %v", c.name, ents)
		}
	}
	// An empty chunk is dropped, and so is nothing else.
	dir := t.TempDir()
	meta, err := WriteStream(dir, mint, maxt, func(gw *GroupWriter) error {
		gw.BeginGroup("g", ms)
		gw.BeginTable()
		gw.BeginChunk([]int64{1000, 1001})
		gw.EndChunk()
		gw.BeginChunk([]int64{1002})
		gw.AddColumn(1, []int32{0}, []float64{5})
		gw.EndChunk()
		return gw.EndGroup()
	}, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := meta.Stats; s.NumChunks != 1 || s.NumSamples != 1 || s.NumSeries != 2 || s.NumGroups != 1 {
		t.Fatalf("stats %+v", s)
	}
}

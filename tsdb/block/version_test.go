package block

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
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

// TestFormatVersions: files marked version 1 (written before the integer
// stats and order-0 decimals, which version 2 only adds) are opened and read
// as before; a version this code does not know is refused.
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
	setVersion(t, dir, 1)
	got, err := read(dir)
	if err != nil {
		t.Fatalf("version 1 block: %v", err)
	}
	if len(got) != len(want) || got[0] != want[0] || got[2] != want[2] {
		t.Fatalf("version 1 block reads %v, want %v", got, want)
	}
	setVersion(t, dir, FormatVersion+1)
	if _, err := read(dir); err == nil {
		t.Fatal("a block of an unknown, newer version was opened")
	}
}

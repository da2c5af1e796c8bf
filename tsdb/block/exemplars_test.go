package block

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// genExemplars returns n series of exemplars in [mint, maxt), in label order.
func genExemplars(rng *rand.Rand, n int, mint, maxt int64) []SeriesExemplars {
	var out []SeriesExemplars
	for i := 0; i < n; i++ {
		se := SeriesExemplars{Labels: labels.FromStrings("__name__", "req_bucket", "job", "api", "le", fmt.Sprintf("%03d", i))}
		t := mint + int64(rng.IntN(1000))
		for k, n := 0, 1+rng.IntN(20); k < n && t < maxt; k++ {
			var el labels.Labels
			switch rng.IntN(3) {
			case 0:
				el = labels.EmptyLabels()
			case 1:
				el = labels.FromStrings("trace_id", fmt.Sprintf("%016x", rng.Uint64()))
			default:
				el = labels.FromStrings("span_id", fmt.Sprint(rng.IntN(1e6)), "trace_id", fmt.Sprintf("%x", rng.Uint64()))
			}
			v := genValues(rng, 1)[0]
			se.Exemplars = append(se.Exemplars, Exemplar{Labels: el, T: t, V: v})
			t += 1 + int64(rng.IntN(60000))
		}
		out = append(out, se)
	}
	return out
}

func exemplarSlice(ss []SeriesExemplars) ExemplarSource {
	return func(yield func(*SeriesExemplars) error) error {
		for i := range ss {
			if err := yield(&ss[i]); err != nil {
				return err
			}
		}
		return nil
	}
}

// readExemplars reads every series of an iterator, copying them.
func readExemplars(t testing.TB, it *ExemplarIterator) []SeriesExemplars {
	t.Helper()
	var out []SeriesExemplars
	for it.Next() {
		se := it.At()
		out = append(out, SeriesExemplars{Labels: se.Labels, Exemplars: append([]Exemplar(nil), se.Exemplars...)})
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	return out
}

// sameExemplars compares exemplar lists bit-exactly (NaN values included).
func sameExemplars(a, b []SeriesExemplars) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d series, want %d", len(a), len(b))
	}
	for i := range a {
		if !labels.Equal(a[i].Labels, b[i].Labels) || len(a[i].Exemplars) != len(b[i].Exemplars) {
			return fmt.Errorf("series %d: %s with %d exemplars, want %s with %d", i, a[i].Labels, len(a[i].Exemplars), b[i].Labels, len(b[i].Exemplars))
		}
		for k, e := range a[i].Exemplars {
			w := b[i].Exemplars[k]
			if e.T != w.T || math.Float64bits(e.V) != math.Float64bits(w.V) || !labels.Equal(e.Labels, w.Labels) {
				return fmt.Errorf("series %s exemplar %d: %+v, want %+v", a[i].Labels, k, e, w)
			}
		}
	}
	return nil
}

func TestExemplarsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	tb := genBlock(rng, 3)
	want := genExemplars(rng, 40, tb.mint, tb.maxt)
	dir := t.TempDir()
	meta, err := Write(dir, tb.mint, tb.maxt, Groups(tb.groups), WriteOptions{Exemplars: exemplarSlice(want)})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, se := range want {
		total += len(se.Exemplars)
	}
	if meta.Stats.NumExemplars != uint64(total) {
		t.Fatalf("meta counts %d exemplars, want %d", meta.Stats.NumExemplars, total)
	}
	b, err := Open(filepath.Join(dir, meta.ULID))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.NumExemplars() != total || b.Meta().Stats.NumExemplars != uint64(total) {
		t.Fatalf("block holds %d exemplars, want %d", b.NumExemplars(), total)
	}
	if err := b.Verify(); err != nil {
		t.Fatal(err)
	}
	if err := sameExemplars(readExemplars(t, b.Exemplars(math.MinInt64, math.MaxInt64, nil)), want); err != nil {
		t.Fatal(err)
	}
	// A time window (inclusive at both ends) and a series filter.
	lo, hi := want[3].Exemplars[0].T, want[3].Exemplars[0].T+30000
	match := func(l labels.Labels) bool { return l.Get("le") < "020" }
	var filtered []SeriesExemplars
	for _, se := range want {
		if !match(se.Labels) {
			continue
		}
		var es []Exemplar
		for _, e := range se.Exemplars {
			if e.T >= lo && e.T <= hi {
				es = append(es, e)
			}
		}
		if len(es) > 0 {
			filtered = append(filtered, SeriesExemplars{Labels: se.Labels, Exemplars: es})
		}
	}
	if len(filtered) == 0 {
		t.Fatal("test window selects nothing")
	}
	if err := sameExemplars(readExemplars(t, b.Exemplars(lo, hi, match)), filtered); err != nil {
		t.Fatalf("window: %v", err)
	}
	// The source form round-trips through another Write.
	dir2 := t.TempDir()
	meta2, err := Write(dir2, tb.mint, tb.maxt, Groups(nil), WriteOptions{Exemplars: b.ExemplarSource(math.MinInt64, math.MaxInt64, nil)})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := Open(filepath.Join(dir2, meta2.ULID))
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if err := b2.Verify(); err != nil {
		t.Fatal(err)
	}
	if b2.NumSeries() != 0 || meta2.Stats.NumSamples != 0 {
		t.Fatalf("exemplar-only block: %d series", b2.NumSeries())
	}
	if err := sameExemplars(readExemplars(t, b2.Exemplars(math.MinInt64, math.MaxInt64, nil)), want); err != nil {
		t.Fatalf("exemplar-only block: %v", err)
	}
	a, _ := os.ReadFile(filepath.Join(dir, meta.ULID, ExemplarsFilename))
	c, _ := os.ReadFile(filepath.Join(dir2, meta2.ULID, ExemplarsFilename))
	if !bytes.Equal(a, c) {
		t.Fatal("rewriting the exemplars gives other bytes")
	}
}

// TestExemplarsAbsent: without exemplars there is no file, and blocks
// written before the file existed (no file, no count in meta.json) open.
func TestExemplarsAbsent(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	tb := genBlock(rng, 2)
	dir := t.TempDir()
	empty := func(yield func(*SeriesExemplars) error) error {
		return yield(&SeriesExemplars{Labels: labels.FromStrings("a", "b")}) // a series without exemplars is skipped
	}
	for _, src := range []ExemplarSource{nil, empty} {
		meta, err := Write(dir, tb.mint, tb.maxt, Groups(tb.groups), WriteOptions{Exemplars: src})
		if err != nil {
			t.Fatal(err)
		}
		bd := filepath.Join(dir, meta.ULID)
		if _, err := os.Stat(filepath.Join(bd, ExemplarsFilename)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("exemplars file without exemplars: %v", err)
		}
		mb, _ := os.ReadFile(filepath.Join(bd, MetaFilename))
		if strings.Contains(string(mb), "numExemplars") {
			t.Fatalf("meta.json counts no exemplars: %s", mb)
		}
		b, err := Open(bd)
		if err != nil {
			t.Fatal(err)
		}
		if b.NumExemplars() != 0 || len(readExemplars(t, b.Exemplars(math.MinInt64, math.MaxInt64, nil))) != 0 {
			t.Fatal("exemplars in a block without")
		}
		if err := b.Verify(); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
}

func TestExemplarsWriteValidation(t *testing.T) {
	l1, l2 := labels.FromStrings("a", "1"), labels.FromStrings("a", "2")
	ex := func(ts ...int64) []Exemplar {
		var es []Exemplar
		for _, t := range ts {
			es = append(es, Exemplar{Labels: labels.FromStrings("trace_id", "x"), T: t, V: 1})
		}
		return es
	}
	for name, ss := range map[string][]SeriesExemplars{
		"unsorted series":  {{Labels: l2, Exemplars: ex(1)}, {Labels: l1, Exemplars: ex(1)}},
		"repeated series":  {{Labels: l1, Exemplars: ex(1)}, {Labels: l1, Exemplars: ex(2)}},
		"before the range": {{Labels: l1, Exemplars: ex(-1)}},
		"at the end":       {{Labels: l1, Exemplars: ex(100)}},
		"time not rising":  {{Labels: l1, Exemplars: ex(5, 5)}},
		"time going back":  {{Labels: l1, Exemplars: ex(5, 4)}},
	} {
		dir := t.TempDir()
		if _, err := Write(dir, 0, 100, Groups(nil), WriteOptions{Exemplars: exemplarSlice(ss)}); err == nil {
			t.Errorf("%s: written", name)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%s: a failed write left %v", name, ents)
		}
	}
}

// TestExemplarsCorruption flips bytes of the exemplars file: Open or Verify
// (and a read of every exemplar) reports it, naming the file.
func TestExemplarsCorruption(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	tb := genBlock(rng, 2)
	src := t.TempDir()
	meta, err := Write(src, tb.mint, tb.maxt, Groups(tb.groups), WriteOptions{Exemplars: exemplarSlice(genExemplars(rng, 10, tb.mint, tb.maxt))})
	if err != nil {
		t.Fatal(err)
	}
	orig := filepath.Join(src, meta.ULID)
	files := []string{MetaFilename, IndexFilename, ChunksFilename, ExemplarsFilename}
	check := func(dir string) error {
		if err := exercise(dir); err != nil {
			return err
		}
		b, err := Open(dir)
		if err != nil {
			return err
		}
		defer b.Close()
		it := b.Exemplars(math.MinInt64, math.MaxInt64, nil)
		for it.Next() {
		}
		return it.Err()
	}
	if err := check(orig); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(orig, ExemplarsFilename))
	if err != nil {
		t.Fatal(err)
	}
	damaged := func(mod func([]byte) []byte) string {
		dir := t.TempDir()
		for _, f := range files {
			b, _ := os.ReadFile(filepath.Join(orig, f))
			if f == ExemplarsFilename {
				b = mod(bytes.Clone(b))
				if b == nil {
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
			pos = len(data) - 1 - rng.IntN(exemplarsTOCLen+8) // the TOC and the last record's CRC
		}
		dir := damaged(func(b []byte) []byte { b[pos] ^= byte(1 + rng.IntN(255)); return b })
		err := check(dir)
		if err == nil {
			t.Fatalf("corruption at %d went unnoticed", pos)
		}
		if !strings.Contains(err.Error(), filepath.Join(dir, ExemplarsFilename)) {
			t.Fatalf("corruption at %d: error does not name the file: %v", pos, err)
		}
		// Record damage is found when read, not at Open (like chunks).
		if pos >= exemplarsHeaderLen && pos < len(data)-exemplarsTOCLen {
			if b, err := Open(dir); err != nil {
				t.Fatalf("record corruption at %d fails Open: %v", pos, err)
			} else {
				b.Close()
			}
		}
	}
	for name, mod := range map[string]func([]byte) []byte{
		"truncated": func(b []byte) []byte { return b[:len(b)/2] },
		"missing":   func([]byte) []byte { return nil },
		"empty":     func([]byte) []byte { return []byte{} },
	} {
		dir := damaged(mod)
		if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), ExemplarsFilename) {
			t.Fatalf("%s exemplars file: Open: %v", name, err)
		}
	}
}

func FuzzExemplars(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 3))
	tb := genBlock(rng, 1)
	dir := f.TempDir()
	meta, err := Write(dir, tb.mint, tb.maxt, Groups(tb.groups), WriteOptions{Exemplars: exemplarSlice(genExemplars(rng, 5, tb.mint, tb.maxt))})
	if err != nil {
		f.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, meta.ULID, ExemplarsFilename))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add([]byte{})
	ms := labels.MustNewMatcher(labels.MatchRegexp, "le", "0.*")
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, skip := range []bool{false, true} {
			b, err := openExemplarsBytes(data, skip)
			if err != nil {
				continue
			}
			b.verifyExemplars()
			for _, r := range [][2]int64{{math.MinInt64, math.MaxInt64}, {tb.mint, tb.mint + 60000}} {
				it := b.Exemplars(r[0], r[1], func(l labels.Labels) bool { return ms.Matches(l.Get("le")) })
				for it.Next() {
					prev := int64(math.MinInt64)
					for _, e := range it.At().Exemplars {
						if e.T < r[0] || e.T > r[1] || e.T <= prev {
							t.Fatalf("exemplar at %d outside %v or out of order", e.T, r)
						}
						prev = e.T
					}
				}
			}
		}
	})
}

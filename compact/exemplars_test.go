package compact

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// writeExemplarBlock writes a block of groups gs and exemplars es (series in label order).
func writeExemplarBlock(t testing.TB, dir string, mint, maxt int64, gs []block.Group, es []block.SeriesExemplars) *block.Block {
	t.Helper()
	src := func(yield func(*block.SeriesExemplars) error) error {
		for i := range es {
			if err := yield(&es[i]); err != nil {
				return err
			}
		}
		return nil
	}
	meta, err := block.Write(dir, mint, maxt, block.Groups(gs), block.WriteOptions{Exemplars: src})
	if err != nil {
		t.Fatal(err)
	}
	b, err := block.Open(filepath.Join(dir, meta.ULID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func allExemplars(t testing.TB, b *block.Block) map[string][]block.Exemplar {
	t.Helper()
	out := map[string][]block.Exemplar{}
	it := b.Exemplars(math.MinInt64, math.MaxInt64, nil)
	var prev labels.Labels
	for it.Next() {
		se := it.At()
		if len(out) > 0 && labels.Compare(prev, se.Labels) >= 0 {
			t.Fatalf("series %s after %s", se.Labels, prev)
		}
		prev = se.Labels
		out[se.Labels.String()] = slices.Clone(se.Exemplars)
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	return out
}

// TestMergeExemplars merges adjacent and overlapping blocks, with and
// without exemplars: every series keeps its exemplars in time order and, at
// a timestamp several sources hold, the one of the source listed last.
func TestMergeExemplars(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 21))
	const span = int64(7200000)
	srcs, _ := genSources(rng, 4, span, 3)
	series := func(i int) labels.Labels {
		return labels.FromStrings("__name__", "lat_bucket", "le", fmt.Sprintf("%02d", i))
	}
	want := map[string][]block.Exemplar{}
	var blocks []*block.Block
	replaced := 0
	for bi, gs := range srcs {
		mint, maxt := int64(bi)*span, int64(bi+1)*span
		if bi == 3 {
			// Exemplars only, overlapping block 1: its exemplars win at equal timestamps.
			mint, maxt, gs = span, 2*span, nil
		}
		var es []block.SeriesExemplars
		if bi != 2 { // block 2 has none (like a block written before exemplars were kept)
			for i := 0; i < 6; i++ {
				if (i+bi)%3 == 0 {
					continue
				}
				se := block.SeriesExemplars{Labels: series(i)}
				for ts := mint + int64(i); ts < maxt; ts += 600000 + int64(rng.IntN(1000)) {
					if bi == 3 && rng.IntN(2) == 0 {
						ts = mint + (ts-mint)/600000*600000 + int64(i) // often the timestamp block 1 used
					}
					e := block.Exemplar{Labels: labels.FromStrings("trace_id", fmt.Sprintf("%d-%d", bi, ts)), T: ts, V: float64(bi*1000 + i)}
					if n := len(se.Exemplars); n > 0 && se.Exemplars[n-1].T >= ts {
						continue
					}
					se.Exemplars = append(se.Exemplars, e)
				}
				es = append(es, se)
			}
		}
		blocks = append(blocks, writeExemplarBlock(t, t.TempDir(), mint, maxt, gs, es))
		for _, se := range es {
			k := se.Labels.String()
			for _, e := range se.Exemplars {
				i, found := slices.BinarySearchFunc(want[k], e.T, func(x block.Exemplar, t int64) int { return cmp.Compare(x.T, t) })
				if found {
					want[k][i] = e // the later source wins
					replaced++
				} else {
					want[k] = slices.Insert(want[k], i, e)
				}
			}
		}
	}
	if blocks[2].NumExemplars() != 0 || replaced == 0 {
		t.Fatalf("block 2 has %d exemplars; %d exemplars at a timestamp of another source", blocks[2].NumExemplars(), replaced)
	}
	m := mergeBlocks(t, blocks)
	got := allExemplars(t, m)
	total := 0
	for k, ws := range want {
		total += len(ws)
		gs := got[k]
		if len(gs) != len(ws) {
			t.Fatalf("%s: %d exemplars, want %d", k, len(gs), len(ws))
		}
		for i := range ws {
			if gs[i].T != ws[i].T || gs[i].V != ws[i].V || !labels.Equal(gs[i].Labels, ws[i].Labels) {
				t.Fatalf("%s exemplar %d: %+v, want %+v", k, i, gs[i], ws[i])
			}
		}
	}
	if len(got) != len(want) || m.NumExemplars() != total || m.Meta().Stats.NumExemplars != uint64(total) {
		t.Fatalf("%d series / %d exemplars, want %d / %d", len(got), m.NumExemplars(), len(want), total)
	}

	// Without exemplars in any source, the merged block has no exemplars file.
	m2 := mergeBlocks(t, []*block.Block{blocks[2], writeBlock(t, t.TempDir(), 3*span, 4*span, nil)})
	if m2.NumExemplars() != 0 || m2.Meta().Stats.NumExemplars != 0 {
		t.Fatal("exemplars from sources without")
	}
}

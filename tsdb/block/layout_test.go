package block

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"

	"github.com/tandem-tsdb/tandem/tsdb/encoding"
)

// TestCompactLayouts checks the writer's version 7 choices on random blocks:
// a postings list of two or more consecutive ids is written as a run and
// any other as deltas, and both decode to the ids of the series with that
// label pair; a column directory leaves out the members exactly when they
// are 0..n-1; series records list their tables exactly when the member
// lacks some chunk of its group's shared table, and leave out the first
// label name's pair exactly when every series has it. Each case must occur.
func TestCompactLayouts(t *testing.T) {
	var runs, lists, dense, sparse, listed, unlisted int
	for seed := uint64(1); seed <= 12; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		b := writeTestBlock(t, genBlock(rng, 1+rng.IntN(6)), WriteOptions{ChunkRows: 50})
		if !b.compact {
			t.Fatalf("block of version %d read as an older version", FormatVersion)
		}
		for i := range b.names {
			e := &b.names[i]
			err := b.forValues(e, func(v []byte, off uint32) bool {
				var want []uint32
				for id := 0; id < b.nseries; id++ {
					l, err := b.Labels(uint32(id))
					if err != nil {
						t.Fatal(err)
					}
					if l.Get(e.name) == string(v) && l.Has(e.name) {
						want = append(want, uint32(id))
					}
				}
				head, _ := binary.Uvarint(b.sec[secPostings][off:])
				run := len(want) > 1 && int(want[len(want)-1]-want[0]) == len(want)-1
				if head&1 == 1 != run || int(head>>1) != len(want) {
					t.Fatalf("seed %d: %s=%q: head %#x for ids %v", seed, e.name, v, head, want)
				}
				if run {
					runs++
				} else {
					lists++
				}
				got, err := b.postingsAt(off, ^uint32(0), nil)
				if err != nil || !slices.Equal(got, want) {
					t.Fatalf("seed %d: %s=%q: postings %v (%v), want %v", seed, e.name, v, got, err, want)
				}
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		for g := 0; g < b.ngroups; g++ {
			_, members, tables, err := b.groupInfo(g)
			if err != nil {
				t.Fatal(err)
			}
			for _, cms := range tables {
				for _, cm := range cms {
					body, _, err := b.chunkBody(cm.off, false)
					if err != nil {
						t.Fatal(err)
					}
					ch, err := parseChunk(body)
					if err != nil {
						t.Fatal(err)
					}
					consecutive := true
					for i := 0; i < ch.ncols; i++ {
						col, err := ch.column(i)
						if err != nil {
							t.Fatal(err)
						}
						consecutive = consecutive && col.member == i
						if ch.find(col.member) != i {
							t.Fatalf("seed %d: member %d found at %d, want %d", seed, col.member, ch.find(col.member), i)
						}
					}
					if (ch.wm == 0) != consecutive {
						t.Fatalf("seed %d: member width %d for members 0..%d consecutive=%v", seed, ch.wm, ch.ncols-1, consecutive)
					}
					if ch.wm == 0 {
						dense++
						if ch.find(ch.ncols) != -1 || ch.find(-1) != -1 {
							t.Fatalf("seed %d: a member beyond the directory was found", seed)
						}
					} else {
						sparse++
					}
				}
			}
			for _, id := range members {
				rec, err := b.seriesRecord(int(id))
				if err != nil {
					t.Fatal(err)
				}
				si, err := b.series(id, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				every := len(si.tables) == 1 && si.tables[0] == memberTable{table: 0, first: 0, last: allChunks}
				if rec[0]&1 == 1 {
					listed++
					if every {
						t.Fatalf("seed %d: series %d lists its tables but has every chunk of table 0", seed, id)
					}
				} else {
					unlisted++
					if !every {
						t.Fatalf("seed %d: series %d lists no tables but has %v", seed, id, si.tables)
					}
				}
			}
		}
	}
	// The first label name's pair is left out of the records exactly when
	// every series has it, and the labels read back are those written.
	var omitted, kept int
	for blk := range 12 {
		lead := []string{"", "__name__", "Aa"}[blk%3]
		lsets, gs := randomLabelSets(rng12(blk), 1+blk*40, lead)
		b := writeTestBlock(t, &testBlock{groups: gs, mint: 0, maxt: 2000}, WriteOptions{})
		every := true
		for id := range lsets {
			l, err := b.Labels(uint32(id))
			if err != nil || !labels.Equal(l, lsets[id]) {
				t.Fatalf("block %d series %d: %s (%v), want %s", blk, id, l, err, lsets[id])
			}
			every = every && l.Has(b.names[0].name)
		}
		if got := b.sec[secSeries][4]&seriesLeadOmitted != 0; got != every || got != (b.leadFirsts != nil) {
			t.Fatalf("block %d: first name %q left out %v, every series has it %v", blk, b.names[0].name, got, every)
		}
		if every {
			omitted++
		} else {
			kept++
		}
	}
	if omitted == 0 || kept == 0 {
		t.Fatalf("first label name left out in %d blocks, kept in %d: a case is missing", omitted, kept)
	}
	if runs == 0 || lists == 0 || dense == 0 || sparse == 0 || listed == 0 || unlisted == 0 {
		t.Fatalf("runs %d lists %d, directories dense %d sparse %d, series listed %d unlisted %d: a case is missing",
			runs, lists, dense, sparse, listed, unlisted)
	}
	t.Logf("runs %d lists %d, directories dense %d sparse %d, series listed %d unlisted %d", runs, lists, dense, sparse, listed, unlisted)
}

func rng12(i int) *rand.Rand { return rand.New(rand.NewPCG(uint64(i), 12)) }

// TestPatchedDecimalColumns: a counter of two decimals with a float
// artifact now and then and a staleness marker at its end is a decimal
// column (version 7: those values kept whole), a third of its XOR size
// or less, and reads back bit for bit through the iterator (row by row and
// in bulk from a later start) and ReadGroup.
func TestPatchedDecimalColumns(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const n = 720
	ts := make([]int64, n)
	col := Column{Member: 0}
	c := 18679.5
	for i := range ts {
		ts[i] = 1_700_000_000_000 + int64(i)*15000
		c = math.Round((c+float64(rng.IntN(200))/100)*100) / 100
		v := c
		if i%97 == 5 {
			v += 2e-12 // 186.79500000000002-like: not a decimal at any scale that fits
		}
		if i == n-1 {
			v = math.Float64frombits(value.StaleNaN)
		}
		col.Rows = append(col.Rows, int32(i))
		col.Values = append(col.Values, v)
	}
	g := Group{Key: "g", Members: []labels.Labels{labels.FromStrings("__name__", "disk_seconds_total")}, Tables: []Table{{Timestamps: ts, Columns: []Column{col}}}}
	b := writeTestBlock(t, &testBlock{groups: []Group{g}, mint: ts[0], maxt: ts[n-1] + 1}, WriteOptions{})
	ins, err := b.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	ci := ins.Groups[0].Tables[0].Columns[0]
	var x encoding.XOREncoder
	for _, v := range col.Values {
		x.Append(v)
	}
	if ci.Encodings["decimal"] != 1 || 3*ci.Bytes > len(x.Bytes()) {
		t.Fatalf("column: %v, %d bytes; XOR alone %d", ci.Encodings, ci.Bytes, len(x.Bytes()))
	}
	want := make([]sample, n)
	for i := range want {
		want[i] = sample{ts[i], col.Values[i]}
	}
	got, err := collect(b.Iterator(0, math.MinInt64, math.MaxInt64, nil))
	if err != nil {
		t.Fatal(err)
	}
	equalSamples(t, "iterator", got, want)
	bts, bvs, err := b.Iterator(0, ts[100], math.MaxInt64, nil).(*Iterator).AppendFloats(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var bulk []sample
	for i := range bts {
		bulk = append(bulk, sample{bts[i], bvs[i]})
	}
	equalSamples(t, "AppendFloats", bulk, want[100:])
	var rg Group
	if ok, err := b.ReadGroup("g", &rg); !ok || err != nil {
		t.Fatalf("ReadGroup: %v %v", ok, err)
	}
	rc := rg.Tables[0].Columns[0]
	for i, v := range rc.Values {
		if !sameBits(v, col.Values[i]) {
			t.Fatalf("ReadGroup value %d: %v, want %v", i, v, col.Values[i])
		}
	}
	if len(rc.Values) != n {
		t.Fatalf("ReadGroup: %d values", len(rc.Values))
	}
}

// TestSeriesInAllSampled: a block whose every series has samples says so
// (version 7), and SeriesIn over a range covering the block then answers
// from the index alone; with a member without samples it does not, and
// that member is not in range. Either way SeriesIn agrees with the
// series' chunk statistics over every range tried.
func TestSeriesInAllSampled(t *testing.T) {
	var all, some int
	for seed := uint64(1); seed <= 12; seed++ {
		rng := rand.New(rand.NewPCG(seed, 31))
		tb := genBlock(rng, 1+rng.IntN(4))
		if seed%3 == 0 {
			g := &tb.groups[0]
			g.Members = append(g.Members, labels.FromStrings("__name__", "never_sampled", "instance", "x"))
		}
		sampled := true // every member has a column somewhere
		for _, g := range tb.groups {
			has := make([]bool, len(g.Members))
			for _, tab := range g.Tables {
				for _, c := range tab.Columns {
					has[c.Member] = true
				}
			}
			sampled = sampled && !slices.Contains(has, false)
		}
		b := writeTestBlock(t, tb, WriteOptions{ChunkRows: 40})
		if b.allSampled != sampled {
			t.Fatalf("seed %d: block says every series sampled %v, the input %v", seed, b.allSampled, sampled)
		}
		if sampled {
			all++
		} else {
			some++
		}
		m := b.Meta()
		var sc SeriesScratch
		for _, r := range [][2]int64{{m.MinTime, m.MaxTime - 1}, {math.MinInt64, math.MaxInt64}, {m.MinTime + 1, m.MaxTime}, {m.MaxTime, math.MaxInt64}} {
			for id := range uint32(b.NumSeries()) {
				stats, err := b.ChunkStats(id, r[0], r[1])
				if err != nil {
					t.Fatal(err)
				}
				l, in, err := b.SeriesIn(id, r[0], r[1], &sc)
				if err != nil || in != (len(stats) > 0) {
					t.Fatalf("seed %d range %v series %d: in %v (%v), %d chunks in range", seed, r, id, in, err, len(stats))
				}
				if in {
					if want, _ := b.Labels(id); !labels.Equal(l, want) {
						t.Fatalf("seed %d series %d: %s, want %s", seed, id, l, want)
					}
				}
			}
		}
	}
	if all == 0 || some == 0 {
		t.Fatalf("blocks with every series sampled %d, with some not %d: a case is missing", all, some)
	}
}

package block

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

const staleNaN = 0x7ff0000000000002

type sample struct {
	t int64
	v float64
}

// genValues returns n values of a random kind.
func genValues(rng *rand.Rand, n int) []float64 {
	vs := make([]float64, n)
	switch rng.IntN(6) {
	case 0: // constant
		c := float64(rng.IntN(100))
		for i := range vs {
			vs[i] = c
		}
	case 1: // integer counter
		c := float64(rng.IntN(1e6))
		for i := range vs {
			c += float64(rng.IntN(2000))
			vs[i] = c
		}
	case 2: // 2-decimal gauge
		for i := range vs {
			vs[i] = float64(rng.IntN(200000)-100000) / 100
		}
	case 3: // special floats mixed with normal ones
		sp := []float64{math.NaN(), math.Float64frombits(staleNaN), math.Copysign(0, -1), 0, math.Inf(1), math.Inf(-1),
			math.SmallestNonzeroFloat64, math.MaxFloat64, -math.MaxFloat64, 1.5, math.Float64frombits(0x7ff8dead00000001)}
		for i := range vs {
			vs[i] = sp[rng.IntN(len(sp))]
		}
	case 4: // random bit patterns
		for i := range vs {
			vs[i] = math.Float64frombits(rng.Uint64())
		}
	default: // float counter with staleness markers
		c := rng.Float64() * 1000
		for i := range vs {
			c += rng.Float64()
			vs[i] = c
			if rng.IntN(20) == 0 {
				vs[i] = math.Float64frombits(staleNaN)
			}
		}
	}
	return vs
}

// genRows returns a random presence pattern over n rows.
func genRows(rng *rand.Rand, n int) []int32 {
	var rows []int32
	switch rng.IntN(4) {
	case 0, 1: // all
		for i := 0; i < n; i++ {
			rows = append(rows, int32(i))
		}
	case 2: // joins and leaves in runs
		in := rng.IntN(2) == 0
		for i := 0; i < n; i++ {
			if rng.IntN(50) == 0 {
				in = !in
			}
			if in {
				rows = append(rows, int32(i))
			}
		}
	default: // random
		for i := 0; i < n; i++ {
			if rng.IntN(3) > 0 {
				rows = append(rows, int32(i))
			}
		}
	}
	return rows
}

type testBlock struct {
	groups   []Group
	expected map[string][]sample // by labels string
	lsets    []labels.Labels
	mint     int64
	maxt     int64
}

// genBlock generates random groups; unaligned tables place a member's samples 7 ms after
// shared rows where it is absent, so tables interleave in time but never share a timestamp.
func genBlock(rng *rand.Rand, ngroups int) *testBlock {
	tb := &testBlock{expected: map[string][]sample{}, mint: 1_700_000_000_000}
	tb.maxt = tb.mint + 1<<40
	extras := []string{"idle", "user", "system", "a.b", ""}
	for g := 0; g < ngroups; g++ {
		inst := fmt.Sprintf("host-%d:9100", g)
		nm := 1 + rng.IntN(8)
		grp := Group{Key: fmt.Sprintf(`instance=%q,job="node"`, inst)}
		for m := 0; m < nm; m++ {
			b := labels.NewBuilder(labels.EmptyLabels())
			b.Set("__name__", fmt.Sprintf("metric_%d", rng.IntN(4)))
			b.Set("job", "node")
			b.Set("instance", inst)
			b.Set("idx", fmt.Sprint(m))
			if e := extras[rng.IntN(len(extras))]; e != "" {
				b.Set("mode", e)
			}
			grp.Members = append(grp.Members, b.Labels())
		}
		n := 1 + rng.IntN(700)
		ts := make([]int64, n)
		t := tb.mint + int64(rng.IntN(100000))
		regular := rng.IntN(2) == 0
		for i := range ts {
			ts[i] = t
			if regular {
				t += 15000
			} else {
				t += 1000 + int64(rng.IntN(30000))
			}
		}
		shared := Table{Timestamps: ts}
		var extra []Table
		for m := 0; m < nm; m++ {
			key := grp.Members[m].String()
			if rng.IntN(6) == 0 {
				continue // member without samples in the shared table
			}
			rows := genRows(rng, n)
			if len(rows) > 0 {
				vals := genValues(rng, len(rows))
				shared.Columns = append(shared.Columns, Column{Member: m, Rows: rows, Values: vals})
				for i, r := range rows {
					tb.expected[key] = append(tb.expected[key], sample{ts[r], vals[i]})
				}
			}
			if rng.IntN(3) == 0 && len(rows) < n {
				// unaligned table at rows the member misses
				var uts []int64
				present := map[int32]bool{}
				for _, r := range rows {
					present[r] = true
				}
				for i := 0; i < n; i++ {
					if !present[int32(i)] && rng.IntN(2) == 0 {
						uts = append(uts, ts[i]+7)
					}
				}
				if len(uts) > 0 {
					ur := make([]int32, len(uts))
					for i := range ur {
						ur[i] = int32(i)
					}
					uv := genValues(rng, len(uts))
					extra = append(extra, Table{Timestamps: uts, Columns: []Column{{Member: m, Rows: ur, Values: uv}}})
					for i := range uts {
						tb.expected[key] = append(tb.expected[key], sample{uts[i], uv[i]})
					}
				}
			}
		}
		rng.Shuffle(len(shared.Columns), func(i, j int) { shared.Columns[i], shared.Columns[j] = shared.Columns[j], shared.Columns[i] })
		grp.Tables = append([]Table{shared}, extra...)
		tb.groups = append(tb.groups, grp)
		tb.lsets = append(tb.lsets, grp.Members...)
	}
	for k, s := range tb.expected {
		slices.SortFunc(s, func(a, b sample) int { return int(a.t - b.t) })
		tb.expected[k] = s
	}
	slices.SortFunc(tb.lsets, labels.Compare)
	rng.Shuffle(len(tb.groups), func(i, j int) { tb.groups[i], tb.groups[j] = tb.groups[j], tb.groups[i] })
	return tb
}

func writeTestBlock(t testing.TB, tb *testBlock, opts WriteOptions) *Block {
	t.Helper()
	dir := t.TempDir()
	meta, err := Write(dir, tb.mint, tb.maxt, Groups(tb.groups), opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(filepath.Join(dir, meta.ULID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func sameBits(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

func collect(it chunkenc.Iterator) ([]sample, error) {
	var out []sample
	for it.Next() == chunkenc.ValFloat {
		t, v := it.At()
		out = append(out, sample{t, v})
	}
	return out, it.Err()
}

func equalSamples(t *testing.T, what string, got, want []sample) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d samples, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].t != want[i].t || !sameBits(got[i].v, want[i].v) {
			t.Fatalf("%s: sample %d: got (%d, %x), want (%d, %x)", what, i, got[i].t, math.Float64bits(got[i].v), want[i].t, math.Float64bits(want[i].v))
		}
	}
}

func window(s []sample, mint, maxt int64) []sample {
	var out []sample
	for _, x := range s {
		if x.t >= mint && x.t <= maxt {
			out = append(out, x)
		}
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			tb := genBlock(rng, 1+rng.IntN(6))
			opts := WriteOptions{ChunkRows: []int{1, 7, 120, 240}[rng.IntN(4)]}
			b := writeTestBlock(t, tb, opts)
			if err := b.Verify(); err != nil {
				t.Fatal(err)
			}
			if got, want := b.NumSeries(), len(tb.lsets); got != want {
				t.Fatalf("series: got %d, want %d", got, want)
			}
			var total uint64
			for _, s := range tb.expected {
				total += uint64(len(s))
			}
			if b.Meta().Stats.NumSamples != total {
				t.Fatalf("NumSamples %d, want %d", b.Meta().Stats.NumSamples, total)
			}
			var it chunkenc.Iterator
			for id, want := range tb.lsets {
				l, err := b.Labels(uint32(id))
				if err != nil {
					t.Fatal(err)
				}
				if !labels.Equal(l, want) {
					t.Fatalf("series %d: labels %s, want %s", id, l, want)
				}
				exp := tb.expected[l.String()]
				it = b.Iterator(uint32(id), math.MinInt64, math.MaxInt64, it)
				got, err := collect(it)
				if err != nil {
					t.Fatal(err)
				}
				equalSamples(t, l.String(), got, exp)
				for k := 0; k < 5; k++ {
					mint := tb.mint + rng.Int64N(12_000_000)
					maxt := mint + rng.Int64N(6_000_000)
					it = b.Iterator(uint32(id), mint, maxt, it)
					got, err := collect(it)
					if err != nil {
						t.Fatal(err)
					}
					equalSamples(t, fmt.Sprintf("%s [%d,%d]", l, mint, maxt), got, window(exp, mint, maxt))
					// AppendFloats (bulk over whole regular chunks) yields the same.
					it = b.Iterator(uint32(id), mint, maxt, it)
					ats, avs, err := it.(*Iterator).AppendFloats(nil, nil)
					if err != nil {
						t.Fatal(err)
					}
					got = got[:0]
					for i := range ats {
						got = append(got, sample{ats[i], avs[i]})
					}
					equalSamples(t, fmt.Sprintf("AppendFloats %s [%d,%d]", l, mint, maxt), got, window(exp, mint, maxt))
					checkStats(t, b, uint32(id), exp, tb, l, mint, maxt, opts.ChunkRows)
				}
				checkSeek(t, b, rng, uint32(id), exp, tb.mint)
			}
		})
	}
}

// checkSeek interleaves Seek and Next calls and compares with the expected samples.
func checkSeek(t *testing.T, b *Block, rng *rand.Rand, id uint32, exp []sample, base int64) {
	t.Helper()
	it := b.Iterator(id, math.MinInt64, math.MaxInt64, nil)
	pos := -1 // index into exp of the current sample
	target := base
	for step := 0; step < 30; step++ {
		if rng.IntN(3) == 0 {
			vt := it.Next()
			pos++
			if pos >= len(exp) {
				if vt != chunkenc.ValNone {
					t.Fatalf("Next past the end returned %v", vt)
				}
				return
			}
		} else {
			target += rng.Int64N(400_000) - 50_000
			vt := it.Seek(target)
			np := max(pos, 0)
			for np < len(exp) && exp[np].t < target {
				np++
			}
			pos = np
			if pos >= len(exp) {
				if vt != chunkenc.ValNone {
					t.Fatalf("Seek(%d) past the end returned %v", target, vt)
				}
				return
			}
			if vt != chunkenc.ValFloat {
				t.Fatalf("Seek(%d) = %v, want a sample (err %v)", target, vt, it.Err())
			}
		}
		tt, v := it.At()
		if tt != exp[pos].t || !sameBits(v, exp[pos].v) || it.AtT() != tt {
			t.Fatalf("step %d: at (%d, %v), want (%d, %v)", step, tt, v, exp[pos].t, exp[pos].v)
		}
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
}

// checkStats recomputes the per-chunk statistics from the input groups.
func checkStats(t *testing.T, b *Block, id uint32, exp []sample, tb *testBlock, l labels.Labels, mint, maxt int64, chunkRows int) {
	t.Helper()
	var want []ChunkStat
	for _, g := range tb.groups {
		m := slices.IndexFunc(g.Members, func(x labels.Labels) bool { return labels.Equal(x, l) })
		if m < 0 {
			continue
		}
		for _, tab := range g.Tables {
			for _, c := range tab.Columns {
				if c.Member != m {
					continue
				}
				for r0, r1 := 0, 0; r0 < len(tab.Timestamps); r0 = r1 {
					r1 = chunkEnd(r0, len(tab.Timestamps), chunkRows)
					var ts []int64
					var vs []float64
					for i, r := range c.Rows {
						if int(r) >= r0 && int(r) < r1 {
							ts = append(ts, tab.Timestamps[r])
							vs = append(vs, c.Values[i])
						}
					}
					if len(ts) == 0 || ts[len(ts)-1] < mint || ts[0] > maxt {
						continue
					}
					st := ChunkStat{MinT: ts[0], MaxT: ts[len(ts)-1], Count: len(ts), First: vs[0], Last: vs[len(vs)-1],
						Min: math.NaN(), Max: math.NaN(), Sum: math.NaN()}
					for _, v := range vs {
						if math.IsNaN(v) {
							continue
						}
						if math.IsNaN(st.Min) {
							st.Min, st.Max, st.Sum = v, v, v
							continue
						}
						st.Min, st.Max, st.Sum = min(st.Min, v), max(st.Max, v), st.Sum+v
					}
					want = append(want, st)
				}
			}
		}
	}
	slices.SortFunc(want, func(a, b ChunkStat) int { return int(a.MinT - b.MinT) })
	got, err := b.ChunkStats(id, mint, maxt)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d chunk stats, want %d", l, len(got), len(want))
	}
	eq := func(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }
	for i := range got {
		g, w := got[i], want[i]
		if g.MinT != w.MinT || g.MaxT != w.MaxT || g.Count != w.Count || !sameBits(g.First, w.First) || !sameBits(g.Last, w.Last) ||
			!eq(g.Min, w.Min) || !eq(g.Max, w.Max) || !(sameBits(g.Sum, w.Sum) || eq(g.Sum, w.Sum)) {
			t.Fatalf("%s: chunk stat %d: got %+v, want %+v", l, i, g, w)
		}
	}
}

func TestStatsStaleness(t *testing.T) {
	stale := math.Float64frombits(staleNaN)
	g := Group{Key: "g", Members: []labels.Labels{labels.FromStrings("a", "1"), labels.FromStrings("a", "2")},
		Tables: []Table{{Timestamps: []int64{10, 20, 30, 40}, Columns: []Column{
			{Member: 0, Rows: []int32{0, 1, 2, 3}, Values: []float64{stale, 5, -2, stale}},
			{Member: 1, Rows: []int32{1, 3}, Values: []float64{stale, stale}},
		}}}}
	dir := t.TempDir()
	meta, err := Write(dir, 0, 100, Groups([]Group{g}), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(filepath.Join(dir, meta.ULID))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st, err := b.ChunkStats(0, 0, 100)
	if err != nil || len(st) != 1 {
		t.Fatalf("stats %v, %v", st, err)
	}
	s := st[0]
	if s.Count != 4 || s.Min != -2 || s.Max != 5 || s.Sum != 3 || !sameBits(s.First, stale) || !sameBits(s.Last, stale) || s.MinT != 10 || s.MaxT != 40 {
		t.Fatalf("stats with staleness markers: %+v", s)
	}
	st, err = b.ChunkStats(1, 0, 100)
	if err != nil || len(st) != 1 {
		t.Fatalf("stats %v, %v", st, err)
	}
	s = st[0]
	if s.Count != 2 || !math.IsNaN(s.Min) || !math.IsNaN(s.Max) || !math.IsNaN(s.Sum) || s.MinT != 20 || s.MaxT != 40 || !sameBits(s.First, stale) {
		t.Fatalf("stats of only staleness markers: %+v", s)
	}
}

func TestPostings(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	tb := genBlock(rng, 12)
	b := writeTestBlock(t, tb, WriteOptions{})
	names := []string{"__name__", "job", "instance", "idx", "mode", "nope"}
	values := []string{"", "node", "metric_1", "metric_3", "idle", "user", "a.b", "host-3:9100", "7", "zzz"}
	regexes := []string{".*", ".+", "metric_1|metric_2", "metric_.*", "(idle|)", "a.b", "host-1.*", "u.*r", "[0-3]", "|x"}
	types := []labels.MatchType{labels.MatchEqual, labels.MatchNotEqual, labels.MatchRegexp, labels.MatchNotRegexp}
	for i := 0; i < 400; i++ {
		var ms []*labels.Matcher
		for k := 0; k <= rng.IntN(3); k++ {
			typ := types[rng.IntN(4)]
			v := values[rng.IntN(len(values))]
			if typ == labels.MatchRegexp || typ == labels.MatchNotRegexp {
				if rng.IntN(3) > 0 {
					v = regexes[rng.IntN(len(regexes))]
				}
			}
			ms = append(ms, labels.MustNewMatcher(typ, names[rng.IntN(len(names))], v))
		}
		var want []uint32
		nameSet := map[string]bool{}
		valSet := map[string]bool{}
		for id, l := range tb.lsets {
			ok := true
			for _, m := range ms {
				ok = ok && m.Matches(l.Get(m.Name))
			}
			if ok {
				want = append(want, uint32(id))
				l.Range(func(l labels.Label) { nameSet[l.Name] = true })
				if v := l.Get("mode"); v != "" {
					valSet[v] = true
				}
			}
		}
		got, err := b.Postings(ms...)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("Postings(%v) = %v, want %v", ms, got, want)
		}
		gotNames, err := b.LabelNames(ms...)
		if err != nil {
			t.Fatal(err)
		}
		if wantNames := sortedKeys(nameSet); !slices.Equal(gotNames, wantNames) {
			t.Fatalf("LabelNames(%v) = %v, want %v", ms, gotNames, wantNames)
		}
		gotVals, err := b.LabelValues("mode", ms...)
		if err != nil {
			t.Fatal(err)
		}
		if wantVals := sortedKeys(valSet); !slices.Equal(gotVals, wantVals) {
			t.Fatalf("LabelValues(mode, %v) = %v, want %v", ms, gotVals, wantVals)
		}
	}
	all, err := b.Postings()
	if err != nil || len(all) != len(tb.lsets) {
		t.Fatalf("Postings() = %d ids, %v", len(all), err)
	}
	vals, err := b.LabelValues("__name__")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, l := range tb.lsets {
		want[l.Get("__name__")] = true
	}
	if !slices.Equal(vals, sortedKeys(want)) {
		t.Fatalf("LabelValues(__name__) = %v", vals)
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestCrashLeavesNoBlock(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	tb := genBlock(rng, 4)
	dir := t.TempDir()
	_, err := Write(dir, tb.mint, tb.maxt, Groups(tb.groups), WriteOptions{ULID: "01TESTCRASH", failAfter: 2})
	if !errors.Is(err, errInjected) {
		t.Fatalf("Write with injected failure: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "01TESTCRASH"+tmpSuffix {
		t.Fatalf("after a crash the dir holds %v, want only the tmp dir", ents)
	}
	if _, err := Open(filepath.Join(dir, ents[0].Name())); err == nil {
		t.Fatal("Open of a partial block succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "01TESTCRASH")); !os.IsNotExist(err) {
		t.Fatalf("block dir exists: %v", err)
	}
	if err := CleanupTmp(dir); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("after CleanupTmp: %v", ents)
	}
	// An ordinary error (bad input) removes its tmp dir itself.
	bad := []Group{{Key: "x", Members: []labels.Labels{labels.FromStrings("a", "b")}, Tables: []Table{{Timestamps: []int64{tb.maxt}}}}}
	if _, err := Write(dir, tb.mint, tb.maxt, Groups(bad), WriteOptions{}); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("Write of out-of-range timestamp: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("after a failed Write: %v", ents)
	}
}

func TestWriteRejectsBadInput(t *testing.T) {
	m := []labels.Labels{labels.FromStrings("a", "1")}
	m2 := []labels.Labels{labels.FromStrings("a", "1"), labels.FromStrings("a", "2")}
	cases := map[string][]Group{
		"unsorted ts":   {{Key: "g", Members: m, Tables: []Table{{Timestamps: []int64{2, 1}}}}},
		"bad member":    {{Key: "g", Members: m, Tables: []Table{{Timestamps: []int64{1}, Columns: []Column{{Member: 1, Rows: []int32{0}, Values: []float64{1}}}}}}},
		"bad row":       {{Key: "g", Members: m, Tables: []Table{{Timestamps: []int64{1}, Columns: []Column{{Member: 0, Rows: []int32{1}, Values: []float64{1}}}}}}},
		"len mismatch":  {{Key: "g", Members: m, Tables: []Table{{Timestamps: []int64{1}, Columns: []Column{{Member: 0, Rows: []int32{0}}}}}}},
		"dup key":       {{Key: "g", Members: m}, {Key: "g", Members: []labels.Labels{labels.FromStrings("a", "2")}}},
		"dup series":    {{Key: "g", Members: m}, {Key: "h", Members: m}},
		"rows unsorted": {{Key: "g", Members: m, Tables: []Table{{Timestamps: []int64{1, 2}, Columns: []Column{{Member: 0, Rows: []int32{1, 0}, Values: []float64{1, 2}}}}}}},
		// Columns may come in any member order, but a member only once.
		"repeated member": {{Key: "g", Members: m2, Tables: []Table{{Timestamps: []int64{1}, Columns: []Column{
			{Member: 1, Rows: []int32{0}, Values: []float64{1}}, {Member: 0, Rows: []int32{0}, Values: []float64{1}}, {Member: 1, Rows: []int32{0}, Values: []float64{1}}}}}}},
	}
	for name, gs := range cases {
		if _, err := Write(t.TempDir(), 0, 100, Groups(gs), WriteOptions{}); err == nil {
			t.Errorf("%s: Write succeeded", name)
		}
	}
}

func TestInspect(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	tb := genBlock(rng, 5)
	b := writeTestBlock(t, tb, WriteOptions{})
	ins, err := b.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	if len(ins.Groups) != len(tb.groups) {
		t.Fatalf("%d groups, want %d", len(ins.Groups), len(tb.groups))
	}
	samples, chunks := 0, 0
	for i, g := range ins.Groups {
		if i > 0 && ins.Groups[i-1].Key >= g.Key {
			t.Fatalf("groups not sorted by key")
		}
		for _, tab := range g.Tables {
			chunks += tab.Chunks
			for _, c := range tab.Columns {
				samples += c.Samples
				n := 0
				for _, k := range c.Encodings {
					n += k
				}
				if n != c.Chunks || c.Bytes <= 0 {
					t.Fatalf("column %+v", c)
				}
			}
		}
	}
	if uint64(samples) != b.Meta().Stats.NumSamples || uint64(chunks) != b.Meta().Stats.NumChunks {
		t.Fatalf("inspect counts %d samples %d chunks, meta %+v", samples, chunks, b.Meta().Stats)
	}
}

// TestEncodingsCovered checks that the random data of the round-trip tests exercises every encoding and presence kind.
func TestEncodingsCovered(t *testing.T) {
	enc, pres := map[string]bool{}, map[string]bool{}
	regular, dod := 0, 0
	for seed := uint64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, 42))
		b := writeTestBlock(t, genBlock(rng, 1+rng.IntN(6)), WriteOptions{ChunkRows: 100})
		ins, err := b.Inspect()
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range ins.Groups {
			for _, tab := range g.Tables {
				regular += tab.Regular
				dod += tab.Chunks - tab.Regular
				for _, c := range tab.Columns {
					for k := range c.Encodings {
						enc[k] = true
					}
					for k := range c.Presence {
						pres[k] = true
					}
				}
			}
		}
	}
	if len(enc) != 3 || len(pres) != 3 || regular == 0 || dod == 0 {
		t.Fatalf("encodings %v presence %v regular %d dod %d", enc, pres, regular, dod)
	}
}

// TestChunkEnd: chunks are chunkRows long, and a remainder shorter than a
// quarter of that joins the last chunk instead of making a chunk of its own.
func TestChunkEnd(t *testing.T) {
	for _, c := range []struct{ r0, n, rows, want int }{
		{0, 721, 240, 240}, {240, 721, 240, 480}, {480, 721, 240, 721},
		{0, 1, 240, 1}, {0, 300, 240, 240}, {0, 299, 240, 299}, {0, 7, 1, 1},
		{0, 960, 480, 480}, {480, 960, 480, 960},
	} {
		if got := chunkEnd(c.r0, c.n, c.rows); got != c.want {
			t.Errorf("chunkEnd(%d, %d, %d) = %d, want %d", c.r0, c.n, c.rows, got, c.want)
		}
	}
}

// TestConstantColumns: a column with one value in every row is stored as the
// value alone, and its stats still follow their definition: the sum is the
// values added in time order, so 0.1 in ten rows (0.9999999999999999, not
// 0.1×10) keeps the long form.
func TestConstantColumns(t *testing.T) {
	ts := []int64{1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000}
	vals := []float64{5, 0.1, math.Inf(1), math.Copysign(0, -1), 2.5}
	g := Group{Key: "g", Tables: []Table{{Timestamps: ts}}}
	for m, v := range vals {
		g.Members = append(g.Members, labels.FromStrings("__name__", "c", "m", strconv.Itoa(m)))
		c := Column{Member: m}
		for r := range ts {
			c.Rows = append(c.Rows, int32(r))
			c.Values = append(c.Values, v)
		}
		g.Tables[0].Columns = append(g.Tables[0].Columns, c)
	}
	b := writeTestBlock(t, &testBlock{mint: 0, maxt: 20000, groups: []Group{g}}, WriteOptions{})
	ins, err := b.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	for id := range uint32(len(vals)) {
		l, _ := b.Labels(id)
		m, _ := strconv.Atoi(l.Get("m"))
		v := vals[m]
		st, err := b.ChunkStats(id, 0, 20000)
		if err != nil || len(st) != 1 {
			t.Fatalf("%s: %v %v", l, st, err)
		}
		sum := v
		for range len(ts) - 1 {
			sum += v
		}
		s := st[0]
		if s.Count != len(ts) || !sameBits(s.First, v) || !sameBits(s.Last, v) || !sameBits(s.Min, v) || !sameBits(s.Max, v) || !sameBits(s.Sum, sum) {
			t.Errorf("%s: stats %+v, want value %v sum %v", l, s, v, sum)
		}
		got, err := collect(b.Iterator(id, 0, 20000, nil))
		if err != nil || len(got) != len(ts) || !sameBits(got[9].v, v) {
			t.Errorf("%s: samples %v %v", l, got, err)
		}
	}
	// 5 takes the short form: type and a one-byte varint, with its
	// directory entry; 0.1 does not.
	cols := ins.Groups[0].Tables[0].Columns
	if cols[0].Bytes > 4 || cols[1].Bytes < 12 {
		t.Errorf("column sizes: 5 takes %d bytes, 0.1 takes %d", cols[0].Bytes, cols[1].Bytes)
	}
}

// TestWriteColumnsAnyOrder checks that a table's columns may list their
// members in any order (validateTable's slow path) when none repeats.
func TestWriteColumnsAnyOrder(t *testing.T) {
	m := []labels.Labels{labels.FromStrings("a", "1"), labels.FromStrings("a", "2"), labels.FromStrings("a", "3")}
	gs := []Group{{Key: "g", Members: m, Tables: []Table{{Timestamps: []int64{1, 2}, Columns: []Column{
		{Member: 2, Rows: []int32{0, 1}, Values: []float64{3, 3}},
		{Member: 0, Rows: []int32{0}, Values: []float64{1}},
		{Member: 1, Rows: []int32{1}, Values: []float64{2}},
	}}}}}
	meta, err := Write(t.TempDir(), 0, 100, Groups(gs), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if meta.Stats.NumSamples != 4 || meta.Stats.NumSeries != 3 {
		t.Fatalf("stats %+v, want 4 samples of 3 series", meta.Stats)
	}
}

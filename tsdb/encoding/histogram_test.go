package encoding

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
)

// nhcbBounds are the custom bucket bounds of a typical classic latency histogram.
var nhcbBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// histGen simulates one native histogram series scraped every 15 s.
type histGen struct {
	rng      *rand.Rand
	schema   int32           // schema of the histograms produced (observations are kept at schema 8)
	custom   []float64       // NHCB bounds, or nil for exponential buckets
	pos, neg map[int32]int64 // counts by schema-8 index (exponential) or bucket (custom)
	zc       uint64          //
	count    uint64          //
	sum      float64         //
	mu, sig  float64         // log-normal parameters of the observations
	negative bool            // observations are normal around 0 instead (negative buckets)
	rate     int             // mean observations per scrape
	hint     histogram.CounterResetHint
	chaos    bool // reduce the schema once, NaN/Inf sums, resets more often
	row      int
}

const genSchema = 8 // observations are bucketed at this schema and reduced on output

func newHistGen(seed uint64, schema int32, custom []float64, negative bool) *histGen {
	return &histGen{
		rng: newRand(seed), schema: schema, custom: custom,
		pos: map[int32]int64{}, neg: map[int32]int64{},
		mu: math.Log(0.1), sig: 1, negative: negative, rate: 100,
	}
}

func (g *histGen) observe(v float64) {
	g.count++
	g.sum += v
	switch {
	case math.IsNaN(v):
		return
	case g.custom != nil:
		g.pos[int32(sort.SearchFloat64s(g.custom, v))]++
	case math.Abs(v) <= 1e-128:
		g.zc++
	case v > 0:
		g.pos[int32(math.Ceil(math.Log2(v)*(1<<genSchema)))]++
	default:
		g.neg[int32(math.Ceil(math.Log2(-v)*(1<<genSchema)))]++
	}
}

// next advances by one scrape and returns the histogram scraped.
func (g *histGen) next() *histogram.Histogram {
	g.row++
	g.hint = histogram.UnknownCounterReset
	resetEvery := 500
	if g.chaos {
		resetEvery = 150
	}
	if g.row > 1 && g.rng.IntN(resetEvery) == 0 { // the process restarted
		clear(g.pos)
		clear(g.neg)
		g.zc, g.count, g.sum = 0, 0, 0
		g.hint = histogram.CounterReset
	}
	if g.chaos && g.row == 300 && g.schema > 0 {
		g.schema-- // too many buckets: the client reduces the resolution
	}
	if g.rng.IntN(20) != 0 { // some scrapes see no observations at all
		n := g.rng.IntN(2*g.rate + 1)
		for range n {
			if g.negative {
				g.observe(g.rng.NormFloat64() * 2)
			} else {
				g.observe(math.Exp(g.mu + g.sig*g.rng.NormFloat64()))
			}
		}
		if g.rng.IntN(200) == 0 {
			g.observe(0) // into the zero bucket
		}
	}
	h := g.build()
	if g.chaos {
		switch g.rng.IntN(40) {
		case 0:
			h.Sum = math.NaN()
		case 1:
			h.Sum = math.Inf(1)
		case 2:
			h.Sum = math.Float64frombits(0x7ff0000000000002) // staleness marker
		case 3:
			h.Count++ // a NaN observation: counted, in no bucket
			g.count++
		}
	}
	return h
}

// build returns the histogram of the current counts, with spans as client_golang
// makes them (gaps of up to two empty buckets are filled).
func (g *histGen) build() *histogram.Histogram {
	h := &histogram.Histogram{
		CounterResetHint: g.hint,
		Schema:           g.schema,
		Count:            g.count,
		Sum:              g.sum,
	}
	if g.custom != nil {
		h.Schema = -53
		h.CustomValues = g.custom
		h.PositiveSpans, h.PositiveBuckets = buildSpans(g.pos, 0)
		return h
	}
	h.ZeroThreshold = 1e-128
	h.ZeroCount = g.zc
	h.PositiveSpans, h.PositiveBuckets = buildSpans(g.pos, genSchema-g.schema)
	h.NegativeSpans, h.NegativeBuckets = buildSpans(g.neg, genSchema-g.schema)
	return h
}

func buildSpans(counts map[int32]int64, shift int32) ([]histogram.Span, []int64) {
	red := map[int32]int64{}
	for i, c := range counts {
		red[((i-1)>>shift)+1] += c
	}
	idx := make([]int32, 0, len(red))
	for i := range red {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	var spans []histogram.Span
	var deltas []int64
	var prev int64
	for j, i := range idx {
		switch {
		case j == 0:
			spans = append(spans, histogram.Span{Offset: i, Length: 1})
		case i-idx[j-1] <= 3: // fill a gap of up to two empty buckets
			for range i - idx[j-1] - 1 {
				deltas = append(deltas, -prev)
				prev = 0
			}
			spans[len(spans)-1].Length += uint32(i - idx[j-1])
		default:
			spans = append(spans, histogram.Span{Offset: i - idx[j-1] - 1, Length: 1})
		}
		deltas = append(deltas, red[i]-prev)
		prev = red[i]
	}
	return spans, deltas
}

// histSeries returns named generated series of n rows each.
func histSeries(n int) []struct {
	name string
	hs   []*histogram.Histogram
} {
	gens := []struct {
		name string
		g    *histGen
	}{
		{"schema3", newHistGen(1, 3, nil, false)},
		{"schema0", newHistGen(2, 0, nil, false)},
		{"schema3-chaos", func() *histGen { g := newHistGen(3, 3, nil, false); g.chaos = true; return g }()},
		{"schema3-negative", newHistGen(4, 3, nil, true)},
		{"nhcb", newHistGen(5, -53, nhcbBounds, false)},
		{"nhcb-chaos", func() *histGen { g := newHistGen(6, -53, nhcbBounds, false); g.chaos = true; return g }()},
		{"idle", func() *histGen { g := newHistGen(7, 3, nil, false); g.rate = 0; return g }()},
	}
	var out []struct {
		name string
		hs   []*histogram.Histogram
	}
	for _, g := range gens {
		hs := make([]*histogram.Histogram, n)
		for i := range hs {
			hs[i] = g.g.next()
		}
		out = append(out, struct {
			name string
			hs   []*histogram.Histogram
		}{g.name, hs})
	}
	return out
}

// randomHistograms returns arbitrary histograms: random schemas, zero-length
// spans, negative offsets, random hints and custom values, occasionally repeated.
func randomHistograms(rng *rand.Rand, n int) []*histogram.Histogram {
	hs := make([]*histogram.Histogram, n)
	var prev *histogram.Histogram
	for i := range hs {
		if prev != nil && rng.IntN(3) == 0 {
			h := prev.Copy()
			for j := range h.PositiveBuckets {
				h.PositiveBuckets[j] += rng.Int64N(5) - 2
			}
			h.Count += uint64(rng.IntN(10))
			hs[i], prev = h, h
			continue
		}
		h := &histogram.Histogram{
			CounterResetHint: histogram.CounterResetHint(rng.IntN(4)),
			Schema:           int32(rng.IntN(14) - 5),
			ZeroThreshold:    randomFloats(rng, 1)[0],
			ZeroCount:        rng.Uint64() >> rng.IntN(64),
			Count:            rng.Uint64() >> rng.IntN(64),
			Sum:              randomFloats(rng, 1)[0],
		}
		if rng.IntN(4) == 0 {
			h.Schema = -53
			h.CustomValues = randomFloats(rng, rng.IntN(5))
		}
		randSpans := func() ([]histogram.Span, []int64) {
			var spans []histogram.Span
			var bs []int64
			for range rng.IntN(4) {
				s := histogram.Span{Offset: int32(rng.Uint32()) >> rng.IntN(32), Length: uint32(rng.IntN(6))}
				spans = append(spans, s)
				for range s.Length {
					bs = append(bs, int64(rng.Uint64())>>rng.IntN(64))
				}
			}
			return spans, bs
		}
		h.PositiveSpans, h.PositiveBuckets = randSpans()
		h.NegativeSpans, h.NegativeBuckets = randSpans()
		hs[i], prev = h, h
	}
	return hs
}

// exactlyEqual reports whether a and b hold the same fields, slices element by
// element (nil and empty alike) and floats bit for bit.
func exactlyEqual(a, b *histogram.Histogram) bool {
	return a.CounterResetHint == b.CounterResetHint && a.Schema == b.Schema &&
		math.Float64bits(a.ZeroThreshold) == math.Float64bits(b.ZeroThreshold) &&
		a.ZeroCount == b.ZeroCount && a.Count == b.Count &&
		math.Float64bits(a.Sum) == math.Float64bits(b.Sum) &&
		slices.Equal(a.PositiveSpans, b.PositiveSpans) && slices.Equal(a.NegativeSpans, b.NegativeSpans) &&
		slices.Equal(a.PositiveBuckets, b.PositiveBuckets) && slices.Equal(a.NegativeBuckets, b.NegativeBuckets) &&
		sameFloatBits(a.CustomValues, b.CustomValues)
}

func encodeHistograms(hs []*histogram.Histogram) []byte {
	var e HistogramEncoder
	for _, h := range hs {
		if err := e.Append(h); err != nil {
			panic(err)
		}
	}
	return e.Bytes()
}

// checkHistograms decodes n histograms from b and compares them with want[:n].
func checkHistograms(t *testing.T, b []byte, want []*histogram.Histogram, valid bool) {
	t.Helper()
	var d HistogramDecoder
	d.Reset(b, len(want))
	var h *histogram.Histogram
	i := 0
	for ; d.Next(); i++ {
		h = d.At(h)
		if !exactlyEqual(h, want[i]) || (valid && !h.Equals(want[i])) {
			t.Fatalf("histogram %d of %d:\n got %+v\nwant %+v", i, len(want), *h, *want[i])
		}
	}
	if d.Err() != nil || i != len(want) {
		t.Fatalf("decoded %d of %d: %v", i, len(want), d.Err())
	}
}

func TestHistogramRoundTrip(t *testing.T) {
	for _, s := range histSeries(720) {
		t.Run(s.name, func(t *testing.T) {
			for _, h := range s.hs {
				if err := h.Validate(); err != nil && !math.IsNaN(h.Sum) {
					// Validate rejects a Count above the buckets only when the sum is not NaN.
					if h.Count == 0 || !errors.Is(err, histogram.ErrHistogramCountMismatch) {
						t.Fatalf("generated an invalid histogram %v: %v", h, err)
					}
				}
			}
			b := encodeHistograms(s.hs)
			checkHistograms(t, b, s.hs, true)
			t.Logf("%d rows, %.2f bytes/histogram", len(s.hs), float64(len(b))/float64(len(s.hs)))
		})
	}
	t.Run("random", func(t *testing.T) {
		hs := randomHistograms(newRand(9), 500)
		checkHistograms(t, encodeHistograms(hs), hs, false)
	})
	t.Run("empty", func(t *testing.T) {
		hs := []*histogram.Histogram{{}, {}, {Schema: -53, CustomValues: nhcbBounds}, {}, {Schema: 3, ZeroThreshold: 1e-128}, {}}
		checkHistograms(t, encodeHistograms(hs), hs, true)
	})
}

// TestHistogramGeneratorRealistic guards the generator: it must produce
// layout changes, counter resets and schema reductions, or the round trip
// tests would not exercise them.
func TestHistogramGeneratorRealistic(t *testing.T) {
	var layouts, resets, reductions int
	for _, s := range histSeries(720) {
		for i := 1; i < len(s.hs); i++ {
			a, b := s.hs[i-1], s.hs[i]
			if !slices.Equal(a.PositiveSpans, b.PositiveSpans) {
				layouts++
			}
			if b.CounterResetHint == histogram.CounterReset {
				resets++
			}
			if b.Schema < a.Schema {
				reductions++
			}
		}
	}
	if layouts < 20 || resets < 3 || reductions < 1 {
		t.Fatalf("layout changes %d, counter resets %d, schema reductions %d", layouts, resets, reductions)
	}
}

func TestHistogramPrefix(t *testing.T) {
	series := histSeries(200)
	series = append(series, struct {
		name string
		hs   []*histogram.Histogram
	}{"random", randomHistograms(newRand(10), 200)})
	for _, s := range series {
		t.Run(s.name, func(t *testing.T) {
			var e HistogramEncoder
			snaps := make([][]byte, len(s.hs)+1)
			snaps[0] = bytes.Clone(e.Bytes())
			for i, h := range s.hs {
				e.Append(h)
				snaps[i+1] = bytes.Clone(e.Bytes())
			}
			for c := range snaps {
				checkHistograms(t, snaps[c], s.hs[:c], false)
				if c > 0 {
					checkHistograms(t, snaps[c], s.hs[:c/2], false) // n < c as well
				}
			}
		})
	}
}

func TestHistogramEncoderReset(t *testing.T) {
	hs := histSeries(50)[2].hs
	var e HistogramEncoder
	for _, h := range randomHistograms(newRand(11), 30) {
		e.Append(h)
	}
	e.Reset()
	for _, h := range hs {
		e.Append(h)
	}
	if !bytes.Equal(e.Bytes(), encodeHistograms(hs)) || e.Count() != len(hs) {
		t.Fatal("a reset encoder writes a different stream")
	}
	// The decoder too is reusable.
	var d HistogramDecoder
	d.Reset(encodeHistograms(randomHistograms(newRand(12), 30)), 30)
	for d.Next() {
	}
	d.Reset(e.Bytes(), len(hs))
	var h histogram.Histogram
	for i := 0; d.Next(); i++ {
		if !exactlyEqual(d.At(&h), hs[i]) {
			t.Fatalf("histogram %d after Reset: got %+v want %+v", i, h, *hs[i])
		}
	}
	if d.Err() != nil {
		t.Fatal(d.Err())
	}
}

// TestHistogramCustomValuesStable checks that CustomValues handed out for one
// layout are not overwritten when the custom bounds change.
func TestHistogramCustomValuesStable(t *testing.T) {
	a := []float64{1, 2, 3}
	b := []float64{4, 5}
	hs := []*histogram.Histogram{
		{Schema: -53, CustomValues: a, PositiveSpans: []histogram.Span{{Length: 1}}, PositiveBuckets: []int64{1}, Count: 1},
		{Schema: -53, CustomValues: b, PositiveSpans: []histogram.Span{{Length: 1}}, PositiveBuckets: []int64{2}, Count: 2},
	}
	var d HistogramDecoder
	d.Reset(encodeHistograms(hs), 2)
	d.Next()
	first := d.At(nil)
	d.Next()
	second := d.At(nil)
	if !slices.Equal(first.CustomValues, a) || !slices.Equal(second.CustomValues, b) {
		t.Fatalf("custom values %v, %v", first.CustomValues, second.CustomValues)
	}
}

func TestHistogramTruncated(t *testing.T) {
	hs := histSeries(60)[2].hs
	b := encodeHistograms(hs)
	for cut := range len(b) {
		var d HistogramDecoder
		d.Reset(b[:cut], len(hs))
		for d.Next() {
		}
		if !errors.Is(d.Err(), ErrTruncated) {
			t.Fatalf("cut at %d of %d: err %v", cut, len(b), d.Err())
		}
	}
}

func TestHistogramMalformed(t *testing.T) {
	stream := func(f func(w *bitWriter)) []byte {
		var w bitWriter
		f(&w)
		w.writeBits(0, 64) // padding, so that nothing is truncated
		w.writeBits(0, 64)
		return w.b
	}
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"first row without layout", stream(func(w *bitWriter) { w.writeBit(0) })},
		{"header without flags", stream(func(w *bitWriter) { w.writeBits(0b1_0000, 5) })},
		{"first layout without schema", stream(func(w *bitWriter) { w.writeBits(0b1_1000, 5); w.writeBit(0) })},
		{"schema out of range", stream(func(w *bitWriter) {
			w.writeBits(0b1_1000, 5)
			w.writeBit(1)
			w.writeGamma(zigzag(1 << 40))
		})},
		{"span offset out of range", stream(func(w *bitWriter) {
			w.writeBits(0b1_1000, 5)
			w.writeBit(1)
			w.writeGamma(zigzag(3))
			w.writeBits(0, 64)
			w.writeGamma(1)
			w.writeGamma(zigzag(-1 << 40))
			w.writeGamma(1)
		})},
		{"sum window reused before set", stream(func(w *bitWriter) {
			var e HistogramEncoder
			e.Append(&histogram.Histogram{})
			*w = bitWriter{b: bytes.Clone(e.Bytes()), free: e.w.free}
			w.writeBits(0b0, 1)  // same layout
			w.writeBits(0b0, 1)  // count delta 0 (k 0)
			w.writeBits(0b0, 1)  // zero count residual 0
			w.writeBits(0b10, 2) // reuse a window never set
		})},
	} {
		var d HistogramDecoder
		d.Reset(c.b, 2)
		for d.Next() {
		}
		if !errors.Is(d.Err(), ErrMalformed) {
			t.Errorf("%s: err %v", c.name, d.Err())
		}
		t.Logf("%s: %v", c.name, d.Err())
	}
}

func TestHistogramDecodeAllocs(t *testing.T) {
	hs := histSeries(240)[0].hs
	b := bytes.Clone(encodeHistograms(hs))
	var d HistogramDecoder
	h := &histogram.Histogram{}
	run := func() {
		d.Reset(b, len(hs))
		for d.Next() {
			h = d.At(h)
		}
	}
	run() // grow the buffers
	if a := testing.AllocsPerRun(10, run); a != 0 {
		t.Fatalf("%v allocations per decode", a)
	}
	var e HistogramEncoder
	enc := func() {
		e.Reset()
		for _, h := range hs {
			e.Append(h)
		}
	}
	enc()
	if a := testing.AllocsPerRun(10, enc); a != 0 {
		t.Fatalf("%v allocations per encode", a)
	}
}

// floatExactlyEqual is exactlyEqual for float histograms.
func floatExactlyEqual(a, b *histogram.FloatHistogram) bool {
	return a.CounterResetHint == b.CounterResetHint && a.Schema == b.Schema &&
		math.Float64bits(a.ZeroThreshold) == math.Float64bits(b.ZeroThreshold) &&
		math.Float64bits(a.ZeroCount) == math.Float64bits(b.ZeroCount) &&
		math.Float64bits(a.Count) == math.Float64bits(b.Count) &&
		math.Float64bits(a.Sum) == math.Float64bits(b.Sum) &&
		slices.Equal(a.PositiveSpans, b.PositiveSpans) && slices.Equal(a.NegativeSpans, b.NegativeSpans) &&
		sameFloatBits(a.PositiveBuckets, b.PositiveBuckets) && sameFloatBits(a.NegativeBuckets, b.NegativeBuckets) &&
		sameFloatBits(a.CustomValues, b.CustomValues)
}

// toFloats converts integer histograms; with rescale, counts are scaled by
// 0.37 (non-integer, as after a rate or an aggregation) and a few NaNs appear.
func toFloats(hs []*histogram.Histogram, rescale bool) []*histogram.FloatHistogram {
	fhs := make([]*histogram.FloatHistogram, len(hs))
	for i, h := range hs {
		fh := h.ToFloat(nil)
		fh.CounterResetHint = h.CounterResetHint // ToFloat keeps it; set anyway for clarity
		if rescale {
			fh.Mul(0.37)
			if i%97 == 5 && len(fh.PositiveBuckets) > 0 {
				fh.PositiveBuckets[0] = math.NaN()
			}
		}
		fhs[i] = fh
	}
	return fhs
}

func encodeFloatHistograms(hs []*histogram.FloatHistogram) []byte {
	var e FloatHistogramEncoder
	for _, h := range hs {
		if err := e.Append(h); err != nil {
			panic(err)
		}
	}
	return e.Bytes()
}

func checkFloatHistograms(t *testing.T, b []byte, want []*histogram.FloatHistogram) {
	t.Helper()
	var d FloatHistogramDecoder
	d.Reset(b, len(want))
	var h *histogram.FloatHistogram
	i := 0
	for ; d.Next(); i++ {
		h = d.At(h)
		if !floatExactlyEqual(h, want[i]) {
			t.Fatalf("float histogram %d of %d:\n got %+v\nwant %+v", i, len(want), *h, *want[i])
		}
	}
	if d.Err() != nil || i != len(want) {
		t.Fatalf("decoded %d of %d: %v", i, len(want), d.Err())
	}
}

func TestFloatHistogramRoundTrip(t *testing.T) {
	series := histSeries(300)
	series = append(series, struct {
		name string
		hs   []*histogram.Histogram
	}{"random", randomHistograms(newRand(13), 300)})
	for _, s := range series {
		for _, rescale := range []bool{false, true} {
			fhs := toFloats(s.hs, rescale)
			b := encodeFloatHistograms(fhs)
			checkFloatHistograms(t, b, fhs)
			// Prefix property at a few counts.
			var e FloatHistogramEncoder
			for i, h := range fhs {
				if i%37 == 0 {
					checkFloatHistograms(t, bytes.Clone(e.Bytes()), fhs[:i])
				}
				e.Append(h)
			}
			if e.Count() != len(fhs) {
				t.Fatal(e.Count())
			}
			t.Logf("%s rescale=%v: %.2f bytes/histogram", s.name, rescale, float64(len(b))/float64(len(fhs)))
		}
	}
}

func TestFloatHistogramTruncatedAndReset(t *testing.T) {
	fhs := toFloats(histSeries(40)[2].hs, true)
	b := encodeFloatHistograms(fhs)
	for cut := range len(b) {
		var d FloatHistogramDecoder
		d.Reset(b[:cut], len(fhs))
		for d.Next() {
		}
		if !errors.Is(d.Err(), ErrTruncated) {
			t.Fatalf("cut at %d of %d: err %v", cut, len(b), d.Err())
		}
	}
	var e FloatHistogramEncoder
	for _, h := range toFloats(randomHistograms(newRand(14), 20), false) {
		e.Append(h)
	}
	e.Reset()
	for _, h := range fhs {
		e.Append(h)
	}
	if !bytes.Equal(e.Bytes(), b) {
		t.Fatal("a reset encoder writes a different stream")
	}
	var d FloatHistogramDecoder
	d.Reset([]byte{0x80 | 0b0010<<3, 0, 0, 0}, 1) // flag K is not used by float histograms
	if d.Next() || !errors.Is(d.Err(), ErrMalformed) {
		t.Fatalf("err %v", d.Err())
	}
}

func TestHistogramAppendInvalid(t *testing.T) {
	good := &histogram.Histogram{Count: 3, PositiveSpans: []histogram.Span{{Offset: 1, Length: 2}}, PositiveBuckets: []int64{1, 1}}
	bad := &histogram.Histogram{Count: 3, PositiveSpans: []histogram.Span{{Offset: 1, Length: 3}}, PositiveBuckets: []int64{1, 1}}
	var e HistogramEncoder
	var fe FloatHistogramEncoder
	for _, h := range []*histogram.Histogram{good, bad, good} {
		err := e.Append(h)
		ferr := fe.Append(h.ToFloat(nil))
		if (err != nil) != (h == bad) || (ferr != nil) != (h == bad) {
			t.Fatalf("Append(%+v): %v, float %v", *h, err, ferr)
		}
	}
	if e.Count() != 2 || fe.Count() != 2 {
		t.Fatalf("counts %d, %d", e.Count(), fe.Count())
	}
	checkHistograms(t, e.Bytes(), []*histogram.Histogram{good, good}, true)
	checkFloatHistograms(t, fe.Bytes(), []*histogram.FloatHistogram{good.ToFloat(nil), good.ToFloat(nil)})
	// At before Next does not panic.
	var d HistogramDecoder
	d.Reset(e.Bytes(), 2)
	d.At(nil)
	var fd FloatHistogramDecoder
	fd.At(nil)
}

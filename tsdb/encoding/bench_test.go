package encoding

import (
	"bytes"
	"testing"

	"math"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// The timestamp benchmarks count one op per value and cycle through chunks of
// chunkRows values, resetting the encoder between chunks as a head chunk would
// be cut. B/value is the encoded size of one full chunk divided by chunkRows.
//
// The value benchmarks (BenchmarkXORAppend, BenchmarkXORDecode) count one op
// per chunk of chunkRows samples, so that batch codecs (decimal) and
// Prometheus's chunks sit next to each other; every row reports ns/sample and
// bytes/sample (encoded chunk size / chunkRows).

var (
	benchTSSink  int64
	benchXORSink float64
)

// tsBenchData returns named timestamp columns with realistic scrape patterns.
func tsBenchData() []struct {
	name string
	ts   []int64
} {
	rng := newRand(100)
	return []struct {
		name string
		ts   []int64
	}{
		{"regular", scrapeTimestamps(rng, chunkRows, 0, 0)},
		{"jitter", scrapeTimestamps(rng, chunkRows, 10, 50)}, // 1 in 10 scrapes off by up to 50 ms
		{"heavy-jitter", scrapeTimestamps(rng, chunkRows, 1, 500)},
	}
}

// xorBenchData returns named value columns with realistic shapes.
func xorBenchData() []struct {
	name string
	vs   []float64
} {
	rng := newRand(101)
	constant := make([]float64, chunkRows)
	for i := range constant {
		constant[i] = 1
	}
	return []struct {
		name string
		vs   []float64
	}{
		{"counter", counterValues(rng, chunkRows)},
		{"gauge-2dec", gaugeValues(rng, chunkRows)},
		{"constant", constant},
	}
}

func BenchmarkTSAppend(b *testing.B) {
	for _, c := range tsBenchData() {
		b.Run(c.name, func(b *testing.B) {
			var e TSEncoder
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i == len(c.ts) {
					i = 0
					e.Reset()
				}
				e.Append(c.ts[i])
			}
			b.ReportMetric(float64(len(encodeTS(c.ts)))/float64(len(c.ts)), "B/value")
		})
	}
}

func BenchmarkTSDecode(b *testing.B) {
	for _, c := range tsBenchData() {
		b.Run(c.name, func(b *testing.B) {
			enc := bytes.Clone(encodeTS(c.ts))
			var d TSDecoder
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if !d.Next() {
					d.Reset(enc, len(c.ts))
					d.Next()
				}
				benchTSSink += d.At()
			}
			b.ReportMetric(float64(len(enc))/float64(len(c.ts)), "B/value")
		})
		b.Run(c.name+"/all", func(b *testing.B) {
			enc := bytes.Clone(encodeTS(c.ts))
			var d TSDecoder
			dst := make([]int64, 0, len(c.ts))
			b.ReportAllocs()
			for b.Loop() {
				d.Reset(enc, len(c.ts))
				dst, _ = d.AppendAll(dst[:0])
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(c.ts)), "ns/value")
		})
	}
}

// valueCodecRows names the rows of BenchmarkXORAppend and BenchmarkXORDecode
// for one value column. "v" rows encode values only; "tv" rows encode the same
// samples as timestamp+value, as Prometheus's chunks always do:
//
//	tandem-v-xor        encoding.XOREncoder over the values alone
//	tandem-tv-xor       encoding.TSEncoder + XOREncoder (tandem's head while appending)
//	tandem-tv-decimal   encoding.TSEncoder + DecimalScale/AppendDecimal (what tandem seals a
//	                    decimal column into when it is smaller than XOR)
//	prometheus-tv-xor   chunkenc.XORChunk (Prometheus's default float chunk)
//	prometheus-tv-xor2  chunkenc.XOR2Chunk (Prometheus's opt-in float chunk)
//
// The tandem "tv" rows charge the whole timestamp column to one series: in a
// tandem chunk one timestamp column is shared by all series of a target, so
// with many series per target the real per-sample cost is close to the "v" row.
// On sealing, tandem also stores a constant column as its 8-byte value.
func valueBenchTS() []int64 {
	return scrapeTimestamps(newRand(102), chunkRows, 10, 50) // 1 in 10 scrapes off by up to 50 ms
}

// reportPerSample reports ns/sample and bytes/sample for ops of n samples each.
func reportPerSample(b *testing.B, n, size int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
	b.ReportMetric(float64(size)/float64(n), "bytes/sample")
}

// promChunk encodes ts, vs into a new Prometheus chunk (XOR or XOR2).
func promChunk(tb testing.TB, c chunkenc.Chunk, ts []int64, vs []float64) chunkenc.Chunk {
	app, err := c.Appender()
	if err != nil {
		tb.Fatal(err)
	}
	for i, t := range ts {
		app.Append(0, t, vs[i])
	}
	return c
}

// encodeDecimal encodes vs with the decimal codec; ok is false if it does not apply.
func encodeDecimal(vs []float64) ([]byte, bool) {
	ms := make([]int64, len(vs))
	k, ok := DecimalScale(vs, MaxDecimalScale, ms)
	if !ok {
		return nil, false
	}
	return AppendDecimal(nil, ms, k), true
}

func BenchmarkXORAppend(b *testing.B) {
	ts := valueBenchTS()
	for _, c := range xorBenchData() {
		n := len(c.vs)
		b.Run(c.name+"/tandem-v-xor", func(b *testing.B) {
			var e XOREncoder
			b.ReportAllocs()
			for b.Loop() {
				e.Reset()
				for _, v := range c.vs {
					e.Append(v)
				}
			}
			reportPerSample(b, n, len(e.Bytes()))
		})
		b.Run(c.name+"/tandem-tv-xor", func(b *testing.B) {
			var te TSEncoder
			var ve XOREncoder
			b.ReportAllocs()
			for b.Loop() {
				te.Reset()
				ve.Reset()
				for i, v := range c.vs {
					te.Append(ts[i])
					ve.Append(v)
				}
			}
			reportPerSample(b, n, len(te.Bytes())+len(ve.Bytes()))
		})
		if _, ok := encodeDecimal(c.vs); ok {
			b.Run(c.name+"/tandem-tv-decimal", func(b *testing.B) {
				var te TSEncoder
				ms := make([]int64, n)
				var dec []byte
				b.ReportAllocs()
				for b.Loop() {
					te.Reset()
					for _, t := range ts {
						te.Append(t)
					}
					k, ok := DecimalScale(c.vs, MaxDecimalScale, ms)
					if !ok {
						b.Fatal("decimal codec does not apply")
					}
					dec = AppendDecimal(dec[:0], ms, k)
				}
				reportPerSample(b, n, len(te.Bytes())+len(dec))
			})
		}
		// Prometheus's head allocates a new chunk per cut, so these rows do too.
		b.Run(c.name+"/prometheus-tv-xor", func(b *testing.B) {
			var ch chunkenc.Chunk
			b.ReportAllocs()
			for b.Loop() {
				ch = promChunk(b, chunkenc.NewXORChunk(), ts, c.vs)
			}
			reportPerSample(b, n, len(ch.Bytes()))
		})
		b.Run(c.name+"/prometheus-tv-xor2", func(b *testing.B) {
			var ch chunkenc.Chunk
			b.ReportAllocs()
			for b.Loop() {
				ch = promChunk(b, chunkenc.NewXOR2Chunk(), ts, c.vs)
			}
			reportPerSample(b, n, len(ch.Bytes()))
		})
	}
}

func BenchmarkXORDecode(b *testing.B) {
	ts := valueBenchTS()
	encTS := bytes.Clone(encodeTS(ts))
	for _, c := range xorBenchData() {
		n := len(c.vs)
		encV := bytes.Clone(encodeXOR(c.vs))
		b.Run(c.name+"/tandem-v-xor", func(b *testing.B) {
			var d XORDecoder
			b.ReportAllocs()
			for b.Loop() {
				d.Reset(encV, n)
				for d.Next() {
					benchXORSink += d.At()
				}
			}
			if d.Err() != nil {
				b.Fatal(d.Err())
			}
			reportPerSample(b, n, len(encV))
		})
		b.Run(c.name+"/tandem-tv-xor", func(b *testing.B) {
			var td TSDecoder
			var vd XORDecoder
			b.ReportAllocs()
			for b.Loop() {
				td.Reset(encTS, n)
				vd.Reset(encV, n)
				for td.Next() && vd.Next() {
					benchTSSink += td.At()
					benchXORSink += vd.At()
				}
			}
			if td.Err() != nil || vd.Err() != nil {
				b.Fatal(td.Err(), vd.Err())
			}
			reportPerSample(b, n, len(encTS)+len(encV))
		})
		if dec, ok := encodeDecimal(c.vs); ok {
			b.Run(c.name+"/tandem-tv-decimal", func(b *testing.B) {
				var td TSDecoder
				var vd DecimalDecoder
				b.ReportAllocs()
				for b.Loop() {
					td.Reset(encTS, n)
					vd.Reset(dec, n)
					for td.Next() && vd.Next() {
						benchTSSink += td.At()
						benchXORSink += vd.At()
					}
				}
				if td.Err() != nil || vd.Err() != nil {
					b.Fatal(td.Err(), vd.Err())
				}
				reportPerSample(b, n, len(encTS)+len(dec))
			})
		}
		for _, pc := range []struct {
			name string
			ch   chunkenc.Chunk
		}{
			{"prometheus-tv-xor", promChunk(b, chunkenc.NewXORChunk(), ts, c.vs)},
			{"prometheus-tv-xor2", promChunk(b, chunkenc.NewXOR2Chunk(), ts, c.vs)},
		} {
			b.Run(c.name+"/"+pc.name, func(b *testing.B) {
				var it chunkenc.Iterator
				b.ReportAllocs()
				for b.Loop() {
					it = pc.ch.Iterator(it)
					for it.Next() == chunkenc.ValFloat {
						t, v := it.At()
						benchTSSink += t
						benchXORSink += v
					}
				}
				if it.Err() != nil {
					b.Fatal(it.Err())
				}
				reportPerSample(b, n, len(pc.ch.Bytes()))
			})
		}
	}
}

// histBenchRows is the number of rows per chunk in BenchmarkHistogramColumn:
// the head's default ChunkRows, and the 120 samples after which Prometheus cuts
// a chunk.
const histBenchRows = 120

// histMembersPerGroup is the number of histogram members of a typical group
// that share one timestamp column.
const histMembersPerGroup = 12

var benchHistSink uint64

// histBenchData returns 20 series of 720 rows for each kind of histogram.
func histBenchData() []struct {
	name   string
	series [][]*histogram.Histogram
} {
	kinds := []struct {
		name   string
		schema int32
		custom []float64
	}{{"schema3", 3, nil}, {"schema0", 0, nil}, {"nhcb", -53, nhcbBounds}}
	var out []struct {
		name   string
		series [][]*histogram.Histogram
	}
	for ki, k := range kinds {
		series := make([][]*histogram.Histogram, 20)
		for s := range series {
			g := newHistGen(uint64(1000*ki+s), k.schema, k.custom, false)
			g.mu = math.Log(0.02 * float64(1+s%5)) // different latencies per series
			g.sig = 0.6 + 0.1*float64(s%4)
			series[s] = make([]*histogram.Histogram, 720)
			for i := range series[s] {
				series[s][i] = g.next()
			}
		}
		out = append(out, struct {
			name   string
			series [][]*histogram.Histogram
		}{k.name, series})
	}
	return out
}

// promHistChunks encodes one series into Prometheus histogram chunks, cut
// every histBenchRows samples and wherever Prometheus's appender starts a new
// chunk itself (counter resets, schema changes). scratch is reused for the copy
// of each histogram the appender may modify.
func promHistChunks(tb testing.TB, ts []int64, hs []*histogram.Histogram, scratch *histogram.Histogram, chunks []chunkenc.Chunk) []chunkenc.Chunk {
	var cur chunkenc.Chunk
	var app, prev chunkenc.Appender
	for i, h := range hs {
		if i%histBenchRows == 0 {
			if cur != nil {
				chunks = append(chunks, cur)
			}
			cur = chunkenc.NewHistogramChunk()
			var err error
			prev = app
			if app, err = cur.Appender(); err != nil {
				tb.Fatal(err)
			}
		}
		h.CopyTo(scratch)
		c, recoded, newApp, err := app.AppendHistogram(prev, 0, ts[i], scratch, false)
		if err != nil {
			tb.Fatal(err)
		}
		if c != nil {
			if !recoded {
				chunks = append(chunks, cur)
			}
			cur = c
		}
		prev, app = nil, newApp
	}
	return append(chunks, cur)
}

func BenchmarkHistogramColumn(b *testing.B) {
	ts := scrapeTimestamps(newRand(103), 720, 10, 50)
	for _, k := range histBenchData() {
		var samples int
		for _, s := range k.series {
			samples += len(s)
		}
		// Encoded sizes, computed once.
		var tandemBytes, tsBytes, promBytes int
		var tandemCols [][]byte
		for _, s := range k.series {
			var e HistogramEncoder
			for i := 0; i < len(s); i += histBenchRows {
				e.Reset()
				for _, h := range s[i:min(i+histBenchRows, len(s))] {
					e.Append(h)
				}
				tandemCols = append(tandemCols, bytes.Clone(e.Bytes()))
				tandemBytes += len(e.Bytes())
			}
			for _, c := range promHistChunks(b, ts, s, &histogram.Histogram{}, nil) {
				promBytes += len(c.Bytes())
			}
		}
		for i := 0; i < len(ts); i += histBenchRows {
			tsBytes += len(encodeTS(ts[i:min(i+histBenchRows, len(ts))]))
		}
		tsShare := float64(tsBytes) * float64(len(k.series)) / histMembersPerGroup // per series' worth of samples
		report := func(b *testing.B, size float64) {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*samples), "ns/sample")
			b.ReportMetric(size/float64(samples), "bytes/sample")
		}
		b.Run(k.name+"/tandem/encode", func(b *testing.B) {
			var e HistogramEncoder
			b.ReportAllocs()
			for b.Loop() {
				for _, s := range k.series {
					for i := 0; i < len(s); i += histBenchRows {
						e.Reset()
						for _, h := range s[i:min(i+histBenchRows, len(s))] {
							e.Append(h)
						}
					}
				}
			}
			report(b, float64(tandemBytes))
			b.ReportMetric((float64(tandemBytes)+tsShare)/float64(samples), "bytes/sample+ts")
		})
		b.Run(k.name+"/tandem/decode", func(b *testing.B) {
			var d HistogramDecoder
			h := &histogram.Histogram{}
			b.ReportAllocs()
			for b.Loop() {
				for _, col := range tandemCols {
					d.Reset(col, histBenchRows)
					for d.Next() {
						h = d.At(h)
						benchHistSink += h.Count
					}
					if d.Err() != nil {
						b.Fatal(d.Err())
					}
				}
			}
			report(b, float64(tandemBytes))
			b.ReportMetric((float64(tandemBytes)+tsShare)/float64(samples), "bytes/sample+ts")
		})
		b.Run(k.name+"/prometheus/encode", func(b *testing.B) {
			scratch := &histogram.Histogram{}
			var chunks []chunkenc.Chunk
			b.ReportAllocs()
			for b.Loop() {
				for _, s := range k.series {
					chunks = promHistChunks(b, ts, s, scratch, chunks[:0])
				}
			}
			report(b, float64(promBytes))
		})
		b.Run(k.name+"/prometheus/decode", func(b *testing.B) {
			var chunks []chunkenc.Chunk
			for _, s := range k.series {
				chunks = promHistChunks(b, ts, s, &histogram.Histogram{}, chunks)
			}
			var it chunkenc.Iterator
			h := &histogram.Histogram{}
			b.ReportAllocs()
			for b.Loop() {
				for _, c := range chunks {
					it = c.Iterator(it)
					for it.Next() == chunkenc.ValHistogram {
						_, h = it.AtHistogram(h)
						benchHistSink += h.Count
					}
					if it.Err() != nil {
						b.Fatal(it.Err())
					}
				}
			}
			report(b, float64(promBytes))
		})
	}
}

// promFloatHistChunks is promHistChunks for float histograms.
func promFloatHistChunks(tb testing.TB, ts []int64, hs []*histogram.FloatHistogram, scratch *histogram.FloatHistogram, chunks []chunkenc.Chunk) []chunkenc.Chunk {
	var cur chunkenc.Chunk
	var app, prev chunkenc.Appender
	for i, h := range hs {
		if i%histBenchRows == 0 {
			if cur != nil {
				chunks = append(chunks, cur)
			}
			cur = chunkenc.NewFloatHistogramChunk()
			var err error
			prev = app
			if app, err = cur.Appender(); err != nil {
				tb.Fatal(err)
			}
		}
		h.CopyTo(scratch)
		c, recoded, newApp, err := app.AppendFloatHistogram(prev, 0, ts[i], scratch, false)
		if err != nil {
			tb.Fatal(err)
		}
		if c != nil {
			if !recoded {
				chunks = append(chunks, cur)
			}
			cur = c
		}
		prev, app = nil, newApp
	}
	return append(chunks, cur)
}

// BenchmarkFloatHistogramColumn is BenchmarkHistogramColumn's schema3 data as
// float histograms (integer-valued counts, as Prometheus converts them) against
// chunkenc.FloatHistogramChunk.
func BenchmarkFloatHistogramColumn(b *testing.B) {
	ts := scrapeTimestamps(newRand(103), 720, 10, 50)
	var series [][]*histogram.FloatHistogram
	samples := 0
	for _, s := range histBenchData()[0].series {
		series = append(series, toFloats(s, false))
		samples += len(s)
	}
	var tandemBytes, promBytes int
	var cols [][]byte
	var chunks []chunkenc.Chunk
	for _, s := range series {
		var e FloatHistogramEncoder
		for i := 0; i < len(s); i += histBenchRows {
			e.Reset()
			for _, h := range s[i:min(i+histBenchRows, len(s))] {
				e.Append(h)
			}
			cols = append(cols, bytes.Clone(e.Bytes()))
			tandemBytes += len(e.Bytes())
		}
		n := len(chunks)
		chunks = promFloatHistChunks(b, ts, s, &histogram.FloatHistogram{}, chunks)
		for _, c := range chunks[n:] {
			promBytes += len(c.Bytes())
		}
	}
	report := func(b *testing.B, size int) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*samples), "ns/sample")
		b.ReportMetric(float64(size)/float64(samples), "bytes/sample")
	}
	b.Run("tandem/encode", func(b *testing.B) {
		var e FloatHistogramEncoder
		b.ReportAllocs()
		for b.Loop() {
			for _, s := range series {
				for i := 0; i < len(s); i += histBenchRows {
					e.Reset()
					for _, h := range s[i:min(i+histBenchRows, len(s))] {
						e.Append(h)
					}
				}
			}
		}
		report(b, tandemBytes)
	})
	b.Run("tandem/decode", func(b *testing.B) {
		var d FloatHistogramDecoder
		h := &histogram.FloatHistogram{}
		b.ReportAllocs()
		for b.Loop() {
			for _, col := range cols {
				d.Reset(col, histBenchRows)
				for d.Next() {
					h = d.At(h)
					benchXORSink += h.Count
				}
				if d.Err() != nil {
					b.Fatal(d.Err())
				}
			}
		}
		report(b, tandemBytes)
	})
	b.Run("prometheus/encode", func(b *testing.B) {
		scratch := &histogram.FloatHistogram{}
		var cs []chunkenc.Chunk
		b.ReportAllocs()
		for b.Loop() {
			for _, s := range series {
				cs = promFloatHistChunks(b, ts, s, scratch, cs[:0])
			}
		}
		report(b, promBytes)
	})
	b.Run("prometheus/decode", func(b *testing.B) {
		var it chunkenc.Iterator
		h := &histogram.FloatHistogram{}
		b.ReportAllocs()
		for b.Loop() {
			for _, c := range chunks {
				it = c.Iterator(it)
				for it.Next() == chunkenc.ValFloatHistogram {
					_, h = it.AtFloatHistogram(h)
					benchXORSink += h.Count
				}
				if it.Err() != nil {
					b.Fatal(it.Err())
				}
			}
		}
		report(b, promBytes)
	})
}

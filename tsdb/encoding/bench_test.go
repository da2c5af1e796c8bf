package encoding

import (
	"bytes"
	"testing"
)

// Benchmarks count one op per value and cycle through chunks of chunkRows
// values, resetting the encoder between chunks as a head chunk would be cut.
// B/value is the encoded size of one full chunk divided by chunkRows.

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
	}
}

func BenchmarkXORAppend(b *testing.B) {
	for _, c := range xorBenchData() {
		b.Run(c.name, func(b *testing.B) {
			var e XOREncoder
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i == len(c.vs) {
					i = 0
					e.Reset()
				}
				e.Append(c.vs[i])
			}
			b.ReportMetric(float64(len(encodeXOR(c.vs)))/float64(len(c.vs)), "B/value")
		})
	}
}

func BenchmarkXORDecode(b *testing.B) {
	for _, c := range xorBenchData() {
		b.Run(c.name, func(b *testing.B) {
			enc := bytes.Clone(encodeXOR(c.vs))
			var d XORDecoder
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if !d.Next() {
					d.Reset(enc, len(c.vs))
					d.Next()
				}
				benchXORSink += d.At()
			}
			b.ReportMetric(float64(len(enc))/float64(len(c.vs)), "B/value")
		})
	}
}

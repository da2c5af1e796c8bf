package encoding

import "testing"
import "slices"

func TestZZBreakdown(t *testing.T) {
	for _, k := range histBenchData() {
		var tot, sumB, layouts, rows, buckets, layB int
		for _, s := range k.series {
			for i := 0; i < len(s); i += 120 {
				var e HistogramEncoder
				var x XOREncoder
				for j, h := range s[i:min(i+120, len(s))] {
					if j > 0 && !slices.Equal(h.PositiveSpans, s[i+j-1].PositiveSpans) {
						layouts++
					}
					before := len(e.Bytes())
					e.Append(h)
					if j == 0 || !slices.Equal(h.PositiveSpans, s[i+j-1].PositiveSpans) {
						layB += len(e.Bytes()) - before
					}
					x.Append(h.Sum)
					rows++
					buckets += len(h.PositiveBuckets)
				}
				tot += len(e.Bytes())
				sumB += len(x.Bytes())
			}
		}
		t.Logf("%s: total %.2f B/row, sum %.2f B/row, layouts %d of %d rows, buckets/row %.1f, layout rows %.2f B/row", k.name, float64(tot)/float64(rows), float64(sumB)/float64(rows), layouts, rows, float64(buckets)/float64(rows), float64(layB)/float64(rows))
	}
}

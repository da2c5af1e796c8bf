//go:build !slicelabels && !dedupelabels

package remote

import (
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
)

// TestMatchLbuf: the 1.0 matcher, on protobuf bytes or on parsed labels,
// agrees with labels.Equal for names and values around the encodings'
// length boundaries (127/128 bytes for protobuf varints, 254/255 for the
// packed labels), and for label fields in a shape other than the common one.
func TestMatchLbuf(t *testing.T) {
	long := func(n int) string { return strings.Repeat("v", n) }
	sets := []labels.Labels{
		labels.FromStrings("__name__", "up", "job", "j"),
		labels.FromStrings("__name__", "up", "job", "k"),
		labels.FromStrings("__name__", "up", "job", "j", "x", "1"),
		labels.FromStrings("__name__", "up"),
		labels.FromStrings("__name__", "up", "a", long(127)),
		labels.FromStrings("__name__", "up", "a", long(128)),
		labels.FromStrings("__name__", "up", "a", long(254)),
		labels.FromStrings("__name__", "up", "a", long(255)),
		labels.FromStrings("__name__", "up", "a", long(300)),
		labels.FromStrings("__name__", "up", long(130), "é"),
		labels.FromStrings("__name__", "up", "ab", "c"),
		labels.FromStrings("__name__", "up", "a", "bc"),
		labels.FromStrings("__name__", "up", "a", "b", "c", ""),
	}
	encode := func(ls labels.Labels, reversed bool) []byte {
		ts := prompb.TimeSeries{Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}
		ls.Range(func(l labels.Label) { ts.Labels = append(ts.Labels, prompb.Label{Name: l.Name, Value: l.Value}) })
		b, err := ts.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !reversed {
			return b
		}
		// The same labels with each label's value field before its name field.
		var out []byte
		for _, l := range ts.Labels {
			v, _ := (&prompb.Label{Value: l.Value}).Marshal()
			n, _ := (&prompb.Label{Name: l.Name}).Marshal()
			inner := append(v, n...)
			out = append(out, 1<<3|wireBytes)
			out = appendUvarint(out, uint64(len(inner)))
			out = append(out, inner...)
		}
		s, _ := (&prompb.Sample{Timestamp: 1, Value: 1}).Marshal()
		out = append(out, 2<<3|wireBytes, byte(len(s)))
		return append(out, s...)
	}
	for _, reversed := range []bool{false, true} {
		for i, sent := range sets {
			d := newDecoder(Limits{})
			for j, stored := range sets {
				if _, err := d.parseSeriesV1(encode(sent, reversed)); err != nil {
					t.Fatal(err)
				}
				if got, want := d.matchLbuf(stored), i == j; got != want {
					t.Errorf("reversed=%v: sent %s, stored %s: match %v, want %v", reversed, sent, stored, got, want)
				}
			}
		}
	}
}

func appendUvarint(b []byte, x uint64) []byte {
	for x >= 0x80 {
		b = append(b, byte(x)|0x80)
		x >>= 7
	}
	return append(b, byte(x))
}

// TestPackedLabels: the packed form read in place is what Labels.Bytes copies.
func TestPackedLabels(t *testing.T) {
	for _, ls := range []labels.Labels{labels.EmptyLabels(), labels.FromStrings("a", "b"), labels.FromStrings("__name__", "x", "y", strings.Repeat("z", 300))} {
		if got, want := packedLabels(ls), string(ls.Bytes(nil)); got != want {
			t.Fatalf("%s: packed %q, Bytes %q", ls, got, want)
		}
	}
}

// BenchmarkMatchRawV1 checks a node_exporter series' 1.0 label fields
// against its stored labels, as every sample of a known series does.
func BenchmarkMatchRawV1(b *testing.B) {
	ls := labels.FromStrings("__name__", "node_cpu_seconds_total", "cpu", "3", "instance", "host-17:9100", "job", "node", "mode", "softirq")
	ts := prompb.TimeSeries{}
	ls.Range(func(l labels.Label) { ts.Labels = append(ts.Labels, prompb.Label{Name: l.Name, Value: l.Value}) })
	enc, err := ts.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	data := packedLabels(ls)
	for b.Loop() {
		if eq, ok := matchRawV1(data, enc); !eq || !ok {
			b.Fatal("no match")
		}
	}
}

// TestSeriesLabels: labels packed into the decoder's arena equal the labels
// built the usual way, values around the packing's 254/255 boundary
// included, and those made before the arena grew stay intact.
func TestSeriesLabels(t *testing.T) {
	d := newDecoder(Limits{})
	var got, want []labels.Labels
	for i := range 2000 {
		v := strings.Repeat("v", i%300)
		lb := v1Labels{{Name: "__name__", Value: "m"}, {Name: "i", Value: strings.Repeat("x", i%7)}, {Name: "long", Value: v}}
		got = append(got, seriesLabels(d, lb))
		want = append(want, labels.FromStrings("__name__", "m", "i", strings.Repeat("x", i%7), "long", v))
	}
	for i := range got {
		if !labels.Equal(got[i], want[i]) || got[i].String() != want[i].String() {
			t.Fatalf("series %d: %s, want %s", i, got[i], want[i])
		}
	}
}

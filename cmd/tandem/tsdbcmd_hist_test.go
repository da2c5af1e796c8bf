package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// TestTSDBInspectHistograms: inspect names the histogram column encodings, and verify accepts the block.
func TestTSDBInspectHistograms(t *testing.T) {
	dir := t.TempDir()
	h := &histogram.Histogram{Count: 3, Sum: 1.5, PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}}, PositiveBuckets: []int64{1, 1}}
	g := block.Group{
		Key:     `job="h"`,
		Members: []labels.Labels{labels.FromStrings("__name__", "a", "job", "h"), labels.FromStrings("__name__", "b", "job", "h")},
		Tables: []block.Table{{Timestamps: []int64{1000, 2000}, Columns: []block.Column{
			{Member: 0, Rows: []int32{0, 1}, Histograms: []*histogram.Histogram{h, h}},
			{Member: 1, Rows: []int32{1}, FloatHistograms: []*histogram.FloatHistogram{h.ToFloat(nil)}},
		}}},
	}
	if _, err := block.Write(dir, 0, 10000, block.Groups([]block.Group{g}), block.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runTSDB([]string{"inspect", "--storage.path=" + dir, "--groups"}, &out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "column chunks by encoding: floathistogram=1,histogram=1") {
		t.Fatalf("inspect output:\n%s", s)
	}
	out.Reset()
	if err := runTSDB([]string{"verify", "--storage.path=" + dir}, &out); err != nil || !strings.Contains(out.String(), ": ok") {
		t.Fatalf("verify: %v\n%s", err, out.String())
	}
}

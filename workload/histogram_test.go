package workload

import (
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

func histRounds(seed uint64, targets, scrapes int) [][]Scrape {
	g := NewHistogramGenerator(HistogramOptions{Targets: targets, Scrapes: scrapes, Seed: seed, Start: time.UnixMilli(1_789_992_000_000)})
	var out [][]Scrape
	for r := g.Next(); r != nil; r = g.Next() {
		out = append(out, r)
	}
	return out
}

func TestHistogramGeneratorValidAndDeterministic(t *testing.T) {
	a, b, c := histRounds(3, 4, 600), histRounds(3, 4, 600), histRounds(4, 4, 600)
	if len(a) != 600 {
		t.Fatalf("%d rounds, want 600", len(a))
	}
	differ := false
	prev := map[uint64]*histogram.Histogram{}
	spans := map[uint64]map[string]bool{}
	var hists, nhcb, resets int
	for i := range a {
		for j := range a[i] {
			sa, sb, sc := a[i][j], b[i][j], c[i][j]
			if sa.T != sb.T || len(sa.Samples) != 17 {
				t.Fatalf("round %d scrape %d: t %d vs %d, %d samples", i, j, sa.T, sb.T, len(sa.Samples))
			}
			for k, s := range sa.Samples {
				if s.H == nil {
					if s.V != sb.Samples[k].V {
						t.Fatalf("float %v differs between equal seeds", s.Labels)
					}
					continue
				}
				hists++
				if err := s.H.Validate(); err != nil {
					t.Fatalf("%v at %d: %v", s.Labels, sa.T, err)
				}
				if !s.H.Equals(sb.Samples[k].H) {
					t.Fatalf("%v at %d differs between equal seeds", s.Labels, sa.T)
				}
				if !s.H.Equals(sc.Samples[k].H) {
					differ = true
				}
				if s.H.Schema == histogram.CustomBucketsSchema {
					nhcb++
					if len(s.H.CustomValues) != len(NHCBBounds) {
						t.Fatalf("NHCB %v has %d custom values", s.Labels, len(s.H.CustomValues))
					}
				} else if s.H.Schema != 3 {
					t.Fatalf("%v: schema %d", s.Labels, s.H.Schema)
				}
				if p := prev[s.Ref]; p != nil && s.H.CounterResetHint != histogram.GaugeType {
					if s.H.CounterResetHint == histogram.CounterReset {
						resets++
					} else if s.H.Count < p.Count {
						t.Fatalf("%v: count fell from %d to %d without a reset", s.Labels, p.Count, s.H.Count)
					}
				}
				prev[s.Ref] = s.H
				if spans[s.Ref] == nil {
					spans[s.Ref] = map[string]bool{}
				}
				spans[s.Ref][spanKey(s.H.PositiveSpans)] = true
			}
		}
	}
	if !differ {
		t.Error("another seed gave the same histograms")
	}
	if want := 4 * 600 * 14; hists != want || nhcb != 4*600*2 {
		t.Errorf("%d histograms (%d NHCB), want %d (%d)", hists, nhcb, want, 4*600*2)
	}
	if resets == 0 {
		t.Error("no target restarted in 4 × 600 scrapes")
	}
	if len(spans[0]) < 3 {
		t.Errorf("series 0 had %d span layouts: buckets never appear", len(spans[0]))
	}
}

func spanKey(ss []histogram.Span) string {
	b := []byte{}
	for _, s := range ss {
		b = append(b, byte(s.Offset), byte(s.Length), ',')
	}
	return string(b)
}

func TestHistogramRequestsRoundTrip(t *testing.T) {
	var scrapes []Scrape
	for _, r := range histRounds(1, 2, 5) {
		scrapes = append(scrapes, r...)
	}
	want := map[string][]*histogram.Histogram{}
	floats := 0
	for _, sc := range scrapes {
		for _, s := range sc.Samples {
			if s.H != nil {
				want[s.Labels.String()] = append(want[s.Labels.String()], s.H)
			} else {
				floats++
			}
		}
	}
	for _, version := range []int{1, 2} {
		reqs, err := BuildRequests(scrapes, SendOptions{Version: version, Shards: 3})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]*histogram.Histogram{}
		sb := labels.NewScratchBuilder(8)
		gotFloats := 0
		for _, shard := range reqs {
			for _, r := range shard {
				e, err := r.Encode()
				if err != nil {
					t.Fatal(err)
				}
				raw, err := snappy.Decode(nil, e.Body)
				if err != nil {
					t.Fatal(err)
				}
				if version == 2 {
					var req writev2.Request
					if err := req.Unmarshal(raw); err != nil {
						t.Fatal(err)
					}
					for _, ts := range req.Timeseries {
						lset, err := ts.ToLabels(&sb, req.Symbols)
						if err != nil {
							t.Fatal(err)
						}
						k := lset.String()
						gotFloats += len(ts.Samples)
						for _, h := range ts.Histograms {
							got[k] = append(got[k], h.ToIntHistogram())
						}
					}
					continue
				}
				var req prompb.WriteRequest
				if err := req.Unmarshal(raw); err != nil {
					t.Fatal(err)
				}
				for _, ts := range req.Timeseries {
					k := ts.ToLabels(&sb, nil).String()
					gotFloats += len(ts.Samples)
					for _, h := range ts.Histograms {
						got[k] = append(got[k], h.ToIntHistogram())
					}
				}
			}
		}
		if gotFloats != floats || len(got) != len(want) {
			t.Fatalf("v%d: %d floats, %d histogram series; want %d, %d", version, gotFloats, len(got), floats, len(want))
		}
		for k, hs := range want {
			if len(got[k]) != len(hs) {
				t.Fatalf("v%d %s: %d histograms, want %d", version, k, len(got[k]), len(hs))
			}
			for i, h := range hs {
				if !h.Equals(got[k][i]) {
					t.Fatalf("v%d %s #%d: got %v, want %v", version, k, i, got[k][i], h)
				}
			}
		}
	}
}

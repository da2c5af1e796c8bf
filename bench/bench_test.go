package bench

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestCompare(t *testing.T) {
	m := func(v string) []byte {
		return []byte(`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"1"},"values":[[1,"1"],[2,"` + v + `"]]}]}}`)
	}
	if d := Compare(m("2"), m("2.0000000000001"), 1e-9); d != "" {
		t.Errorf("equal within tolerance reported as %q", d)
	}
	if d := Compare(m("2"), m("2.1"), 1e-9); !strings.Contains(d, "1 of 2 points differ") {
		t.Errorf("different values: %q", d)
	}
	if d := Compare(m("NaN"), m("NaN"), 1e-9); d != "" {
		t.Errorf("NaN vs NaN: %q", d)
	}
	vec := []byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1,"1"]}]}}`)
	if d := Compare(vec, m("2"), 1e-9); d == "" {
		t.Error("vector and matrix of different shapes compared equal")
	}
	l1 := []byte(`{"status":"success","data":["a","b"]}`)
	l2 := []byte(`{"status":"success","data":["b","a"]}`)
	l3 := []byte(`{"status":"success","data":["a"]}`)
	if d := Compare(l1, l2, 0); d != "" {
		t.Errorf("label lists in another order: %q", d)
	}
	if d := Compare(l1, l3, 0); d == "" {
		t.Error("different label lists compared equal")
	}
	s1 := []byte(`{"status":"success","data":[{"__name__":"x","a":"1"}]}`)
	s2 := []byte(`{"status":"success","data":[{"__name__":"x","a":"2"}]}`)
	if d := Compare(s1, s2, 0); d == "" {
		t.Error("different series compared equal")
	}
}

func TestQuantile(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5}
	if q := quantile(s, 0.5); q != 3 {
		t.Errorf("median %v", q)
	}
	if q := quantile(s, 0.9); q != 4.6 {
		t.Errorf("p90 %v", q)
	}
}

func TestReadProc(t *testing.T) {
	st, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.HWMBytes <= 0 || st.RSSBytes <= 0 || st.HWMBytes < st.RSSBytes {
		t.Errorf("implausible memory %+v", st)
	}
}

func TestBuildWorkload(t *testing.T) {
	w, err := BuildWorkload(WorkloadOptions{Targets: 3, Scrapes: 10, Interval: 15 * time.Second, Version: 1, Shards: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(w.Series * 10); w.Samples != want || w.Series == 0 {
		t.Errorf("%d samples for %d series × 10 scrapes", w.Samples, w.Series)
	}
	if got := w.MaxT - w.MinT; got != 9*15000 {
		t.Errorf("span %d ms", got)
	}
	var n int64
	for _, sh := range w.Shards {
		for i, b := range sh {
			n += int64(b.Samples)
			if b.Samples > 2000 || (i > 0 && b.Round < sh[i-1].Round) {
				t.Fatalf("batch %d: %d samples, round %d", i, b.Samples, b.Round)
			}
		}
	}
	if n != w.Samples {
		t.Errorf("batches hold %d samples, workload %d", n, w.Samples)
	}
	// The first scrape's requests come first in every shard, on their own.
	if w.FirstSamples != int64(w.Series) || len(w.First) != len(w.Shards) {
		t.Errorf("first scrape: %d samples in %v requests, want %d", w.FirstSamples, w.First, w.Series)
	}
}

func TestCompareHistograms(t *testing.T) {
	m := func(c string) []byte {
		return []byte(`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"1"},"histograms":[[1,{"count":"3","sum":"0.5","buckets":[[0,"0.1","0.2","` + c + `"],[0,"0.2","0.4","1"]]}]]}]}}`)
	}
	if d := Compare(m("2"), m("2"), 1e-9); d != "" {
		t.Errorf("equal histograms: %q", d)
	}
	if d := Compare(m("2"), m("2.5"), 1e-9); !strings.Contains(d, "1 of 4 points differ") {
		t.Errorf("different bucket counts: %q", d)
	}
	vec := []byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"histogram":[1,{"count":"3","sum":"0.5","buckets":[]}]}]}}`)
	if d := Compare(vec, vec, 1e-9); d != "" {
		t.Errorf("equal histogram vectors: %q", d)
	}
}

func TestBuildHistogramWorkload(t *testing.T) {
	w, err := BuildWorkload(WorkloadOptions{Targets: 2, Scrapes: 20, Interval: 15 * time.Second, Version: 2, Shards: 3, Seed: 1, Histograms: true})
	if err != nil {
		t.Fatal(err)
	}
	if w.Series != 2*17 || w.Samples != int64(w.Series*20) || w.HistSamples != 2*14*20 {
		t.Errorf("%d series, %d samples, %d histogram samples", w.Series, w.Samples, w.HistSamples)
	}
	if w.MaxT > time.Now().UnixMilli() || w.MaxT-w.MinT < 19*15000 {
		t.Errorf("span %d..%d", w.MinT, w.MaxT)
	}
	for _, sh := range w.Shards {
		for _, b := range sh {
			if b.ContentType != "application/x-protobuf;proto=io.prometheus.write.v2.Request" {
				t.Fatalf("content type %q", b.ContentType)
			}
		}
	}
	if qs := HistogramQuerySet(w); len(qs) < 5 {
		t.Errorf("%d histogram queries", len(qs))
	}
}

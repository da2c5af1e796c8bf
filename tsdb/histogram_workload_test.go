package tsdb

import (
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/workload"
)

// The native-histogram workload of the histogram benchmarks
// (workload.HistogramGenerator): hwTargets targets scraped every 15 s for
// six hours. Each target exposes ten exponential (schema 3) counter
// histograms of a log-normal latency, two exponential gauge histograms, two
// NHCB counter histograms and three floats (up, a counter, a gauge). A
// target restarts about every four hours: all its counters reset together.
const (
	hwTargets  = 20
	hwScrapes  = 1440
	hwInterval = int64(15000)
	hwStart    = int64(1_789_992_000_000) // a multiple of 6 h: the 2 h blocks compact into one on both sides
)

// hwSeries is one series of the workload: hs (histograms) or fs (floats) has
// one value per scrape.
type hwSeries struct {
	lset labels.Labels
	hs   []*histogram.Histogram
	fs   []float64
}

// histWorkload is the generated data, series grouped by target.
type histWorkload struct {
	targets      [][]hwSeries
	offset       []int64 // each target's scrape offset in ms
	histSamples  int
	floatSamples int
}

// t returns the timestamp of scrape i of target tg.
func (w *histWorkload) t(tg, i int) int64 { return hwStart + int64(i)*hwInterval + w.offset[tg] }

// mint and maxt bound the data (maxt exclusive, at the end of the six hours).
func (w *histWorkload) mint() int64 { return hwStart }
func (w *histWorkload) maxt() int64 { return hwStart + hwScrapes*hwInterval }

var (
	hwOnce sync.Once
	hwData *histWorkload
)

// histBenchWorkload returns the workload, generated once per test binary.
func histBenchWorkload() *histWorkload {
	hwOnce.Do(func() { hwData = genHistWorkload(7) })
	return hwData
}

// genHistWorkload collects the workload package's histogram generator
// (the one cmd/tandem-bench -workload histograms sends) into per-series
// slices: both benchmarks measure the same data.
func genHistWorkload(seed uint64) *histWorkload {
	g := workload.NewHistogramGenerator(workload.HistogramOptions{
		Targets: hwTargets, Scrapes: hwScrapes, Interval: time.Duration(hwInterval) * time.Millisecond,
		Start: time.UnixMilli(hwStart), Seed: seed,
	})
	w := &histWorkload{targets: make([][]hwSeries, hwTargets), offset: make([]int64, hwTargets)}
	for round := g.Next(); round != nil; round = g.Next() {
		for _, sc := range round {
			ss := w.targets[sc.Target]
			if ss == nil {
				ss = make([]hwSeries, len(sc.Samples))
				for i, smp := range sc.Samples {
					ss[i].lset = smp.Labels
				}
				w.targets[sc.Target] = ss
				w.offset[sc.Target] = sc.T - hwStart
			}
			for i, smp := range sc.Samples {
				if smp.H != nil {
					ss[i].hs = append(ss[i].hs, smp.H)
					w.histSamples++
				} else {
					ss[i].fs = append(ss[i].fs, smp.V)
					w.floatSamples++
				}
			}
		}
	}
	return w
}

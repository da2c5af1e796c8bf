package main

import (
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/workload"
)

// relabel returns copies of scrapes shifted by shift ms whose series carry
// cluster="eu-1" and, unless replica is empty, __replica__=replica.
func relabel(scrapes []workload.Scrape, replica string, shift int64) []workload.Scrape {
	out := make([]workload.Scrape, len(scrapes))
	for i, sc := range scrapes {
		c := sc
		c.T += shift
		c.Samples = make([]workload.Sample, len(sc.Samples))
		for j, s := range sc.Samples {
			lb := labels.NewBuilder(s.Labels).Set("cluster", "eu-1")
			if replica != "" {
				lb.Set("__replica__", replica)
			}
			s.Labels = lb.Labels()
			c.Samples[j] = s
		}
		out[i] = c
	}
	return out
}

// TestHAFailoverEndToEnd: an HA pair writes the same targets through the
// real remote-write client; replica A stops, B takes over after the failover
// timeout, A comes back. tandem must hold exactly what one replica's
// in-order delivery gives: A's samples, then B's, never both.
func TestHAFailoverEndToEnd(t *testing.T) {
	start := time.Now().Add(-30 * time.Minute).Truncate(time.Minute)
	base := lateScrapes(t, 2, 80, start, 33)
	a, b := relabel(base, "a", 0), relabel(base, "b", 2000)
	k := 40 // A's scrapes 0..k arrive, then A stops
	p := startTandem(t, t.TempDir(), "--ha.failover-timeout=1s")
	var aFirst, bFirst, aRest, bRest []workload.Scrape
	for i := range a {
		if a[i].T < base[k*2].T { // scrapes are per target, interleaved
			aFirst, bFirst = append(aFirst, a[i]), append(bFirst, b[i])
		} else {
			aRest, bRest = append(aRest, a[i]), append(bRest, b[i])
		}
	}
	send(t, p, 1, aFirst, 2) // A is elected for both targets' groups
	send(t, p, 2, bFirst, 2) // B's copies are dropped
	time.Sleep(1500 * time.Millisecond)
	send(t, p, 2, bRest, 2) // A silent past the timeout: B takes over
	send(t, p, 1, aRest, 2) // A returns: B stays elected
	var want []workload.Scrape
	want = append(want, relabel(base, "", 0)[:len(aFirst)]...)
	want = append(want, relabel(base[len(aFirst):], "", 2000)...)
	compareRange(t, p, want, base[0].T, base[len(base)-1].T+2000, "HA failover")
	if m := scrapeMetrics(t, p); m["tandem_ha_deduplicated_samples_total"] == 0 {
		t.Fatal("no samples deduplicated")
	}
}

package main

import (
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/workload"
)

// withReplica returns copies of scrapes whose series carry __replica__ and
// whose timestamps are shifted (the two replicas scrape at different times).
func withReplica(scrapes []workload.Scrape, replica string, shift int64) []workload.Scrape {
	out := make([]workload.Scrape, len(scrapes))
	for i, sc := range scrapes {
		c := sc
		c.T += shift
		c.Samples = make([]workload.Sample, len(sc.Samples))
		for j, s := range sc.Samples {
			s.Labels = labels.NewBuilder(s.Labels).Set("__replica__", replica).Set("cluster", "eu-1").Labels()
			c.Samples[j] = s
		}
		out[i] = c
	}
	return out
}

func withCluster(scrapes []workload.Scrape, shift int64) []workload.Scrape {
	out := make([]workload.Scrape, len(scrapes))
	for i, sc := range scrapes {
		c := sc
		c.T += shift
		c.Samples = make([]workload.Sample, len(sc.Samples))
		for j, s := range sc.Samples {
			s.Labels = labels.NewBuilder(s.Labels).Set("cluster", "eu-1").Labels()
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
	a, b := withReplica(base, "a", 0), withReplica(base, "b", 2000)
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
	want = append(want, withCluster(base, 0)[:len(aFirst)]...)
	want = append(want, withCluster(base[len(aFirst):], 2000)...)
	compareRange(t, p, want, base[0].T, base[len(base)-1].T+2000, "HA failover")
	if m := scrapeMetrics(t, p); m["tandem_ha_deduplicated_samples_total"] == 0 {
		t.Fatal("no samples deduplicated")
	}
}

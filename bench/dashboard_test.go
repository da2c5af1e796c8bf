package bench

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDashboardAgainstTandem refreshes the dashboard against a real tandem
// process holding a tiny workload: every request of every refresh answered
// with data, latencies recorded, the target rotating, and the answers
// compared equal with themselves and not with another system's.
func TestDashboardAgainstTandem(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bin, w := tinyTandem(t, dir)
	p := startFilled(t, bin, filepath.Join(dir, "work"), w)

	const refreshes = 4
	d := RunDashboard(ctx, p, w, DashboardOptions{Refreshes: refreshes, Timeout: time.Minute})
	panels := len(DashboardSet(w, 0))
	if panels < 20 || d.Panels != panels || d.Refreshes != refreshes || d.Requests != refreshes*panels || d.Errors != 0 {
		t.Fatalf("%d panels, %d refreshes, %d requests, %d errors (%s); want %d refreshes of %d panels",
			d.Panels, d.Refreshes, d.Requests, d.Errors, d.FirstError, refreshes, panels)
	}
	if !(d.P50Ms > 0 && d.P50Ms <= d.P90Ms && d.P90Ms <= d.P99Ms) || d.RefreshP50Ms < d.P50Ms || d.QueriesPerSec <= d.RefreshesPerSec || d.RefreshesPerSec <= 0 {
		t.Errorf("implausible latencies %+v", d)
	}
	for _, ps := range d.PanelStats {
		if ps.Errors != 0 || ps.MedianMs <= 0 || ps.MinEntries < 1 {
			t.Errorf("panel %s: %+v", ps.Name, ps)
		}
	}
	// Refresh k shows host-k: its load1 panel names that target only.
	load1 := slices.IndexFunc(d.PanelStats, func(ps PanelStats) bool { return ps.Name == "load1" })
	for k, bodies := range d.answers {
		for tgt := range w.Targets {
			want := tgt == k%w.Targets
			if got := bytes.Contains(bodies[load1], fmt.Appendf(nil, `"host-%d:9100"`, tgt)); got != want {
				t.Errorf("refresh %d: load1 answer names host-%d: %v", k, tgt, got)
			}
		}
	}

	if d := RunDashboard(ctx, p, w, DashboardOptions{Refreshes: refreshes, Timeout: time.Nanosecond}); d.Refreshes != 1 || d.Requests != panels {
		t.Errorf("past its time bound: %d refreshes, %d requests; want one refresh", d.Refreshes, d.Requests)
	}

	self := []PeerResult{{Kind: Tandem, Dashboard: d}, {Kind: Prometheus, Dashboard: d}}
	eq := CompareDashboards(Prometheus, self, 1e-9)
	if len(eq) != 1 || eq[0].Equal != refreshes*panels || eq[0].Total != refreshes*panels || len(eq[0].Diffs) != 0 {
		t.Errorf("answers against themselves: %+v", eq)
	}
	// Another system whose refreshes are shifted by one target differs in
	// every panel naming the target but in the last refresh (host-0 both:
	// three targets, four refreshes).
	shifted := *d
	shifted.answers = slices.Concat(d.answers[1:], d.answers[:1])
	eq = CompareDashboards(Prometheus, []PeerResult{{Kind: VictoriaMetrics, Dashboard: &shifted}, {Kind: Prometheus, Dashboard: d}}, 1e-9)
	if len(eq) != 1 || eq[0].Equal >= eq[0].Total || !strings.Contains(eq[0].Diffs["load1"], "3 of 4 refreshes differ") {
		t.Errorf("shifted answers: %+v", eq)
	}
	if _, ok := eq[0].Diffs["variable $instance"]; ok {
		t.Errorf("the $instance variable lists every target, yet differs: %s", eq[0].Diffs["variable $instance"])
	}
}

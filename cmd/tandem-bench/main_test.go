package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tandem-tsdb/tandem/bench"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// tandemBinary builds tandem once for the package's tests.
func tandemBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "tandem-bench-test"); buildErr != nil {
			return
		}
		buildErr = bench.BuildTandem(context.Background(), filepath.Join(binDir, "tandem"))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "tandem")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// readReport reads the harness's JSON report at path.
func readReport(t *testing.T, path string) bench.Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestHarnessAgainstTandem runs the harness end to end against a real tandem
// process on a tiny workload: every phase must produce plausible numbers and
// every query an answer. (The peers are measured by make bench, not here.)
func TestHarnessAgainstTandem(t *testing.T) {
	dir := t.TempDir()
	bin := tandemBinary(t)
	out := filepath.Join(dir, "report.json")
	md := filepath.Join(dir, "report.md")
	err := run([]string{"-peers", "tandem", "-tandem", bin, "-targets", "2", "-hours", "0.25", "-reps", "2", "-dashboard-refreshes", "3",
		"-workdir", filepath.Join(dir, "work"), "-json", out, "-md", md, "-profile-dir", dir, "-profile-seconds", "1"})
	if err != nil {
		t.Fatal(err)
	}
	rep := readReport(t, out)
	if len(rep.Results) != 1 {
		t.Fatalf("%d results, want 1", len(rep.Results))
	}
	r := rep.Results[0]
	if r.Samples != rep.Samples || r.Samples == 0 || r.SamplesPerSec <= 0 || r.CPUSeconds <= 0 ||
		r.PeakRSSBytes <= 0 || r.DiskBytes <= 0 || r.BytesPerSample <= 0 || r.BytesPerSample > 16 {
		t.Errorf("implausible result %+v", r)
	}
	// CPU comes in clock ticks of 10 ms: the tiny first phase may show none.
	if r.NewSeriesPerSec <= 0 || r.CPUNsPerNewSeries < 0 || r.CPUNsPerNewSeries > r.CPUSeconds*1e9/float64(rep.Series) {
		t.Errorf("series creation not measured: %v/s, %v ns CPU per new series", r.NewSeriesPerSec, r.CPUNsPerNewSeries)
	}
	if len(r.Queries) != 9 {
		t.Fatalf("%d queries, want 9", len(r.Queries))
	}
	for _, q := range r.Queries {
		if q.Error != "" || len(q.Runs) != 2 {
			t.Errorf("query %s: %d runs, error %q", q.Name, len(q.Runs), q.Error)
		}
	}
	checkOnBlocks(t, r)
	if d := r.Dashboard; d == nil || rep.DashboardRefreshes != 3 || d.Refreshes != 3 || d.Panels < 20 || d.Requests != 3*d.Panels || d.P99Ms <= 0 {
		t.Errorf("dashboard %+v of %d refreshes", d, rep.DashboardRefreshes)
	}
	for _, f := range []string{"tandem-ingest.cpu.pprof", "tandem-heap.pprof", "tandem-query.cpu.pprof", "tandem-dashboard.cpu.pprof", "tandem-blocks-query.cpu.pprof"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("profile %s: %v", f, err)
		}
	}
	if fi, err := os.Stat(md); err != nil || fi.Size() == 0 {
		t.Errorf("markdown report: %v", err)
	}
}

// TestHarnessHistogramsAgainstTandem runs the native-histogram workload end
// to end against tandem on a tiny size: every histogram query must answer
// with data, and the per-histogram-sample numbers must be filled in.
func TestHarnessHistogramsAgainstTandem(t *testing.T) {
	dir := t.TempDir()
	bin := tandemBinary(t)
	out := filepath.Join(dir, "report.json")
	err := run([]string{"-workload", "histograms", "-peers", "tandem", "-tandem", bin, "-targets", "2", "-hours", "0.25", "-reps", "1",
		"-workdir", filepath.Join(dir, "work"), "-json", out, "-md", filepath.Join(dir, "report.md")})
	if err != nil {
		t.Fatal(err)
	}
	rep := readReport(t, out)
	if rep.Workload != "histograms" || rep.Protocol != 2 || rep.HistSamples != int64(2*14*rep.Scrapes) || len(rep.Results) != 1 {
		t.Fatalf("report %+v", rep)
	}
	r := rep.Results[0]
	if r.Samples != rep.Samples || r.CPUNsPerHistSample <= r.CPUNsPerSample || r.BytesPerHistSample <= r.BytesPerSample || r.BytesPerHistSample > 200 {
		t.Errorf("implausible result %+v", r)
	}
	if len(r.Queries) != 7 {
		t.Fatalf("%d queries, want 7", len(r.Queries))
	}
	for _, q := range r.Queries {
		if q.Error != "" || len(q.Runs) != 1 || q.Points < 10 {
			t.Errorf("query %s: %d runs, %d points, error %q", q.Name, len(q.Runs), q.Points, q.Error)
		}
	}
	checkOnBlocks(t, r)
	if err := run([]string{"-workload", "histograms", "-peers", "tandem,victoriametrics", "-tandem", bin}); err == nil {
		t.Error("histograms with VictoriaMetrics accepted")
	}
	if err := run([]string{"-workload", "histograms", "-dashboard-refreshes", "3", "-peers", "tandem", "-tandem", bin}); err == nil {
		t.Error("histograms with the node_exporter dashboard accepted")
	}
	if r.Dashboard != nil {
		t.Errorf("dashboard run on the histogram workload: %+v", r.Dashboard)
	}
}

// checkOnBlocks checks the query set timed again on the restarted process:
// every query answered, with as many points as right after ingest (the
// snapshot holds every sample).
func checkOnBlocks(t *testing.T, r bench.PeerResult) {
	t.Helper()
	b := r.OnBlocks
	if b == nil {
		t.Fatal("no queries on blocks")
	}
	if b.OpenSeconds <= 0 || b.OpenRSSBytes <= 0 || b.PeakRSSBytes < b.OpenRSSBytes || len(b.Queries) != len(r.Queries) {
		t.Fatalf("implausible queries on blocks %+v", b)
	}
	for i, q := range b.Queries {
		if q.Error != "" || q.Points != r.Queries[i].Points || q.MedianMs <= 0 {
			t.Errorf("query %s on blocks: %d points (head %d), median %v ms, error %q", q.Name, q.Points, r.Queries[i].Points, q.MedianMs, q.Error)
		}
	}
}

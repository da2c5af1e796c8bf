package bench

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"
)

// TestRunAgainstTandem runs a real tandem through the whole harness (ingest,
// persist, the query set, the dashboard, a restart on its snapshot and the
// query set again), then times the query set on two tandem processes
// holding the same data at once, run by run: both answer every query every
// run, with the same answers.
func TestRunAgainstTandem(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bin, w := tinyTandem(t, dir)
	qs := QuerySet(w)
	const reps = 3
	o := RunOptions{WorkDir: filepath.Join(dir, "run"), Reps: reps, Slack: 1000, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Dashboard: DashboardOptions{Refreshes: 2, Timeout: time.Minute}, Blocks: true, Interleave: true}
	res := Run(ctx, []Kind{Tandem}, map[Kind]string{Tandem: bin}, w, qs, o)
	if len(res) != 1 || res[0].Error != "" {
		t.Fatalf("results %+v", res)
	}
	r := res[0]
	if r.Samples != w.Samples || r.BytesPerSample <= 0 || r.Dashboard == nil || r.Dashboard.Refreshes != 2 || r.OnBlocks == nil || r.PeakRSSAfterAll <= 0 {
		t.Fatalf("incomplete result: samples %d of %d, bytes/sample %v, dashboard %v, blocks %v", r.Samples, w.Samples, r.BytesPerSample, r.Dashboard, r.OnBlocks)
	}
	for _, set := range [][]QueryResult{r.Queries, r.OnBlocks.Queries} {
		if len(set) != len(qs) {
			t.Fatalf("%d query results, want %d", len(set), len(qs))
		}
		for _, q := range set {
			if q.Error != "" || len(q.Runs) != reps || q.MedianMs <= 0 || q.P90Ms < q.MedianMs {
				t.Errorf("%s: error %q, %d runs, median %v, p90 %v", q.Name, q.Error, len(q.Runs), q.MedianMs, q.P90Ms)
			}
		}
	}
	if eq := CompareWith(Tandem, []PeerResult{r, {Kind: Prometheus, Queries: r.OnBlocks.Queries}}, 1e-9, HeadQueries); len(eq) != 1 || eq[0].Equal != len(qs) {
		t.Errorf("the head's answers and the blocks' differ: %+v", eq)
	}

	// Two processes at once, each with the same data.
	ps := []*Peer{startFilled(t, bin, filepath.Join(dir, "a"), w), startFilled(t, bin, filepath.Join(dir, "b"), w)}
	two := RunQueriesTogether(ctx, ps, qs, reps)
	if len(two) != 2 {
		t.Fatalf("%d result sets, want 2", len(two))
	}
	for i, q := range qs {
		for j := range two {
			if r := two[j][i]; r.Name != q.Name || r.Error != "" || len(r.Runs) != reps {
				t.Errorf("process %d, %s: name %q, error %q, %d runs", j, q.Name, r.Name, r.Error, len(r.Runs))
			}
		}
		if d := Compare(two[0][i].body, two[1][i].body, 1e-9); d != "" {
			t.Errorf("%s: the two processes answer differently: %s", q.Name, d)
		}
	}
}

// tinyTandem builds tandem from this tree into dir and returns it with a
// workload of three targets and ten minutes.
func tinyTandem(t *testing.T, dir string) (string, *Workload) {
	t.Helper()
	bin := filepath.Join(dir, "bin", "tandem")
	if err := BuildTandem(context.Background(), bin); err != nil {
		t.Fatal(err)
	}
	w, err := BuildWorkload(WorkloadOptions{Targets: 3, Scrapes: 41, Interval: 15 * time.Second, Version: 1, Shards: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return bin, w
}

// startFilled starts tandem (bin) in workDir, replays w into it and stops
// it when the test ends.
func startFilled(t *testing.T, bin, workDir string, w *Workload) *Peer {
	t.Helper()
	ctx := context.Background()
	p, err := StartPeer(ctx, PeerConfig{Kind: Tandem, Binary: bin, WorkDir: workDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	if _, err := Send(ctx, p.URL(p.WritePath()), w, 1000); err != nil {
		t.Fatal(err)
	}
	return p
}

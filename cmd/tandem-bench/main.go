// Command tandem-bench runs tandem, VictoriaMetrics and Prometheus one after
// the other on the same pre-encoded node_exporter-like remote-write workload
// and reports ingest rate, CPU per sample, peak memory, bytes on disk and
// query latency side by side (markdown and JSON); see docs/benchmarks.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/tandem-tsdb/tandem/bench"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tandem-bench:", err)
		os.Exit(1)
	}
}

func defaultBinDir() string {
	if d := os.Getenv("TANDEM_BIN_DIR"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "tandem-bin")
	}
	return "/root/.cache/tandem-bin"
}

func run(args []string) error {
	fs := flag.NewFlagSet("tandem-bench", flag.ContinueOnError)
	size := fs.String("size", "quick", "Workload size: quick (about 20k series, 3 h) or large (about 100k series, 3 h).")
	targets := fs.Int("targets", 0, "Targets (521 series each, 17 for -workload histograms); overrides -size.")
	hours := fs.Float64("hours", 3, "Time span of the workload in hours (default 6 for -workload histograms).")
	interval := fs.Duration("interval", 15*time.Second, "Scrape interval.")
	protocol := fs.Int("protocol", 1, "Remote-write protocol version (1 or 2); VictoriaMetrics takes 1.0.")
	shards := fs.Int("shards", 8, "Concurrent sender shards.")
	peers := fs.String("peers", "tandem,victoriametrics,prometheus", "Systems to run, in order.")
	binDir := fs.String("bin-dir", defaultBinDir(), "Directory holding the victoria-metrics and prometheus binaries.")
	tandemBin := fs.String("tandem", "", "tandem binary (default: built from this source tree).")
	reps := fs.Int("reps", 7, "Timed runs of each query (after one warm-up).")
	workDir := fs.String("workdir", "", "Directory for the systems' data (default: a temporary directory, removed at the end).")
	jsonOut := fs.String("json", "", "Write the report as JSON to this file.")
	mdOut := fs.String("md", "", "Write the report as markdown to this file (default: standard output).")
	tol := fs.Float64("tolerance", 1e-9, "Relative tolerance for equal query answers.")
	profDir := fs.String("profile-dir", "", "Write pprof profiles of every system here: CPU during ingest and queries, heap after ingest.")
	profSecs := fs.Int("profile-seconds", 5, "Length of the CPU profiles (from the start of the phase).")
	lag := fs.Duration("shard-lag", 15*time.Second, "How far (in data time) a sender shard may run ahead of the slowest: about one scrape interval, as when Prometheus sends in real time; larger values model a backlog (at most 1h: Prometheus refuses older samples).")
	wl := fs.String("workload", "floats", "Workload: floats (node_exporter-like) or histograms (native histograms and NHCB, remote-write 2.0, 20 targets × 6 h for -size quick; VictoriaMetrics is left out: it does not store native histograms).")
	dashRefreshes := fs.Int("dashboard-refreshes", 30, "Dashboard refreshes after the query set: every panel of a node_exporter dashboard of one target at once, the target rotating (-workload floats only); 0 disables.")
	queryDelay := fs.Duration("query-delay", 0, "Leave every system alone this long after ingest before the queries (e.g. one maintenance interval, 15s, after a -shard-lag replay).")
	onBlocks := fs.Bool("blocks", true, "After the queries, restart every system on its persisted data (tandem and Prometheus on their snapshot: everything in blocks; VictoriaMetrics on its merged parts) and time the query set again.")
	interleave := fs.Bool("interleave", true, "Keep every system running after its ingest and time the query sets of all of them in turn, query by query and run by run (a change in the machine's speed then weighs on all alike); false runs each system through every phase alone.")
	dashTimeout := fs.Duration("dashboard-timeout", 2*time.Minute, "No dashboard refresh starts after this long (per system).")
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	hist := false
	switch *wl {
	case "floats":
	case "histograms":
		hist = true
		if set["protocol"] && *protocol != 2 {
			return fmt.Errorf("-workload histograms sends remote-write 2.0; -protocol %d is not supported", *protocol)
		}
		*protocol = 2
		if !set["hours"] {
			*hours = 6
		}
		if !set["peers"] {
			*peers = "tandem,prometheus"
		}
		if strings.Contains(*peers, string(bench.VictoriaMetrics)) {
			return fmt.Errorf("-workload histograms: VictoriaMetrics does not store Prometheus native histograms; leave it out of -peers")
		}
	default:
		return fmt.Errorf("-workload must be floats or histograms, got %q", *wl)
	}
	if hist {
		if set["dashboard-refreshes"] && *dashRefreshes > 0 {
			return fmt.Errorf("-dashboard-refreshes: the dashboard reads node_exporter metrics, absent from -workload histograms")
		}
		*dashRefreshes = 0
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	n := *targets
	if n == 0 {
		switch *size {
		case "quick":
			n = 40
			if hist {
				n = 20
			}
		case "large":
			n = 200
			if hist {
				n = 100
			}
		default:
			return fmt.Errorf("-size must be quick or large, got %q", *size)
		}
	} else {
		*size = "custom"
	}
	if *workDir == "" {
		d, err := os.MkdirTemp("", "tandem-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*workDir = d
	}
	bins := map[bench.Kind]string{}
	var order []bench.Kind
	for _, p := range strings.Split(*peers, ",") {
		k := bench.Kind(strings.TrimSpace(p))
		var bin string
		switch k {
		case bench.Tandem:
			bin = *tandemBin
			if bin == "" {
				bin = filepath.Join(*workDir, "tandem-bin")
				logger.Info("building tandem", "out", bin)
				if err := bench.BuildTandem(ctx, bin); err != nil {
					return err
				}
			}
		case bench.VictoriaMetrics:
			bin = filepath.Join(*binDir, "victoria-metrics")
		case bench.Prometheus:
			bin = filepath.Join(*binDir, "prometheus")
		default:
			return fmt.Errorf("unknown system %q in -peers", p)
		}
		if _, err := os.Stat(bin); err != nil {
			return fmt.Errorf("%s binary: %w (make bench-peers installs the peers)", k, err)
		}
		bins[k] = bin
		order = append(order, k)
	}

	scrapes := int(*hours*3600/interval.Seconds()) + 1
	logger.Info("building workload", "targets", n, "scrapes", scrapes, "protocol", *protocol)
	t0 := time.Now()
	w, err := bench.BuildWorkload(bench.WorkloadOptions{Targets: n, Scrapes: scrapes, Interval: *interval, Version: *protocol, Shards: *shards, Seed: 1, Histograms: hist})
	if err != nil {
		return err
	}
	requests := 0
	for _, s := range w.Shards {
		requests += len(s)
	}
	rep := &bench.Report{
		Command: "go run ./cmd/tandem-bench " + strings.Join(args, " "), Date: time.Now().UTC().Format(time.RFC3339),
		Machine: machine(), Size: *size, Protocol: *protocol, Series: w.Series, Targets: n, Scrapes: scrapes,
		Interval: interval.String(), Samples: w.Samples, Workload: *wl, HistSamples: w.HistSamples, Requests: requests, WireBytes: w.Bytes, Shards: *shards,
		BuildSecs: time.Since(t0).Seconds(), EntropyFloor: w.EntropyFloor, QueryReps: *reps, Interleaved: *interleave, Tolerance: *tol, GoMaxProcs: runtime.GOMAXPROCS(0),
		DashboardRefreshes: *dashRefreshes,
	}
	if *dashRefreshes > 0 {
		rep.DashboardTimeout = dashTimeout.String()
	}
	logger.Info("workload ready", "samples", w.Samples, "series", w.Series, "requests", requests, "mb", w.Bytes>>20)
	qs := bench.QuerySet(w)
	if hist {
		qs = bench.HistogramQuerySet(w)
	}
	if *profDir != "" {
		if err := os.MkdirAll(*profDir, 0o755); err != nil {
			return fmt.Errorf("profile dir: %w", err)
		}
	}
	slack := int(*lag / (5 * time.Second)) // rounds are 5 s batch deadlines
	opts := bench.RunOptions{WorkDir: *workDir, Reps: *reps, Slack: slack, Logger: logger, ProfileDir: *profDir, ProfileSeconds: *profSecs,
		Dashboard: bench.DashboardOptions{Refreshes: *dashRefreshes, Timeout: *dashTimeout}, QueryDelay: *queryDelay, Blocks: *onBlocks, Interleave: *interleave}
	rep.Results = bench.Run(ctx, order, bins, w, qs, opts)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	rep.Equality = bench.CompareWith(bench.Prometheus, rep.Results, *tol, bench.HeadQueries)
	if *onBlocks {
		rep.BlocksEquality = bench.CompareWith(bench.Prometheus, rep.Results, *tol, bench.BlockQueries)
	}
	if *dashRefreshes > 0 {
		rep.DashboardRef = order[0]
		if bins[bench.Prometheus] != "" {
			rep.DashboardRef = bench.Prometheus
		}
		rep.DashboardEquality = bench.CompareDashboards(rep.DashboardRef, rep.Results, *tol)
	}
	rep.EvaluateTargets()

	if *jsonOut != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	out := os.Stdout
	if *mdOut != "" {
		f, err := os.Create(*mdOut)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	rep.Markdown(out)
	for _, r := range rep.Results {
		if r.Error != "" {
			return fmt.Errorf("%s failed: %s", r.Kind, r.Error)
		}
	}
	return nil
}

// machine describes the host: CPU model, cores and memory.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if _, v, ok := strings.Cut(l, ":"); ok {
					model = strings.TrimSpace(v)
				}
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%s, %d cores%s, %s/%s", model, runtime.NumCPU(), mem, runtime.GOOS, runtime.GOARCH)
}

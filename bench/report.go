package bench

import (
	"fmt"
	"io"
	"strings"
)

// Report is one run of the harness: the machine, the workload, every
// system's measurements and how their answers compare with Prometheus's.
type Report struct {
	Command  string `json:"command"`
	Date     string `json:"date"`
	Machine  string `json:"machine"`
	Size     string `json:"size"`
	Protocol int    `json:"remote_write_version"`
	Series   int    `json:"series"`
	Targets  int    `json:"targets"`
	Scrapes  int    `json:"scrapes_per_target"`
	Interval string `json:"scrape_interval"`
	Samples  int64  `json:"samples"`
	// Workload is "floats" (node_exporter-like) or "histograms" (native
	// histograms, HistSamples of the Samples).
	Workload    string       `json:"workload"`
	HistSamples int64        `json:"histogram_samples,omitempty"`
	Requests    int          `json:"requests"`
	WireBytes   int64        `json:"encoded_bytes"`
	Shards      int          `json:"shards"`
	Results     []PeerResult `json:"results"`
	Equality    []Equality   `json:"equality_with_prometheus"`
	// BlocksEquality compares the answers timed on blocks (OnBlocks).
	BlocksEquality []Equality `json:"blocks_equality_with_prometheus,omitempty"`
	Goals          []Target   `json:"goals"`
	BuildSecs      float64    `json:"workload_build_seconds"`
	// EntropyFloor is a lower bound on bytes per sample for the generated
	// values (workload.Generator.EntropyBytesPerSample).
	EntropyFloor float64 `json:"value_entropy_bytes_per_sample"`
	QueryReps    int     `json:"query_reps"`
	Interleaved  bool    `json:"interleaved"` // the systems' query runs taken in turn (RunOptions.Interleave)
	// Dashboard refreshes requested (0: none run) and their time bound; the
	// answers are compared with DashboardRef's (Prometheus when it ran,
	// else the first system).
	DashboardRefreshes int        `json:"dashboard_refreshes"`
	DashboardTimeout   string     `json:"dashboard_timeout,omitempty"`
	DashboardRef       Kind       `json:"dashboard_reference,omitempty"`
	DashboardEquality  []Equality `json:"dashboard_equality,omitempty"`
	Tolerance          float64    `json:"relative_tolerance"`
	GoMaxProcs         int        `json:"gomaxprocs"`
}

// Target is one performance target of tandem against a peer, as measured.
type Target struct {
	Name     string  `json:"name"`
	Measured float64 `json:"measured"`
	Goal     string  `json:"goal"`
	Met      bool    `json:"met"`
}

func (r *Report) result(k Kind) *PeerResult {
	for i := range r.Results {
		if r.Results[i].Kind == k && r.Results[i].Error == "" {
			return &r.Results[i]
		}
	}
	return nil
}

// EvaluateTargets fills Goals from the results (those whose peer ran).
func (r *Report) EvaluateTargets() {
	t := r.result(Tandem)
	if t == nil {
		return
	}
	add := func(name string, measured float64, goal string, met bool) {
		r.Goals = append(r.Goals, Target{Name: name, Measured: measured, Goal: goal, Met: met})
	}
	if r.HistSamples > 0 {
		if p := r.result(Prometheus); p != nil {
			add("CPU per histogram sample ÷ Prometheus", t.CPUNsPerHistSample/p.CPUNsPerHistSample, "(none; for reference)", true)
			add("bytes per histogram sample ÷ Prometheus", t.BytesPerHistSample/p.BytesPerHistSample, "(none; for reference)", true)
			add("sum of query medians ÷ Prometheus", t.QueryMedianSum/p.QueryMedianSum, "(none; for reference)", true)
			for _, e := range r.Equality {
				if e.Kind == Tandem {
					add("query answers equal to Prometheus's", float64(e.Equal), fmt.Sprintf("= %d", e.Total), e.Equal == e.Total)
				}
			}
		}
		return
	}
	add("CPU per sample, end to end (ns)", t.CPUNsPerSample, "≤ 350", t.CPUNsPerSample <= 350)
	if vm := r.result(VictoriaMetrics); vm != nil {
		x := t.SamplesPerSec / vm.SamplesPerSec
		add("ingest samples/s ÷ VictoriaMetrics", x, "≥ 4", x >= 4)
		x = t.BytesPerSample / vm.BytesPerSample
		add("bytes/sample ÷ VictoriaMetrics", x, "≤ 0.55", x <= 0.55)
		if r.EntropyFloor > 0 {
			x = r.EntropyFloor / vm.BytesPerSample
			add("values' entropy floor ÷ VictoriaMetrics's bytes/sample", x, "(no lossless encoding goes below)", true)
		}
		x = float64(t.PeakRSSBytes) / float64(vm.PeakRSSBytes)
		add("peak RSS during ingest ÷ VictoriaMetrics", x, "≤ 1", x <= 1)
		x = t.QueryMedianSum / vm.QueryMedianSum
		add("sum of query medians ÷ VictoriaMetrics", x, "≤ 0.5", x <= 0.5)
		n, worst := p90Within(t.Queries, vm.Queries, 0.7)
		add("queries with p90 ≤ 0.7× VictoriaMetrics's (worst ratio in the goal)", float64(n), fmt.Sprintf("= %d (worst %.2f)", len(t.Queries), worst), n == len(t.Queries))
		if t.OnBlocks != nil && vm.OnBlocks != nil {
			x = t.OnBlocks.QueryMedianSum / vm.OnBlocks.QueryMedianSum
			add("sum of query medians on blocks ÷ VictoriaMetrics", x, "≤ 0.5", x <= 0.5)
			n, worst = p90Within(t.OnBlocks.Queries, vm.OnBlocks.Queries, 0.7)
			add("queries on blocks with p90 ≤ 0.7× VictoriaMetrics's", float64(n), fmt.Sprintf("= %d (worst %.2f)", len(t.OnBlocks.Queries), worst), n == len(t.OnBlocks.Queries))
		}
		addDashboard(add, t, vm)
	}
	if p := r.result(Prometheus); p != nil {
		x := t.SamplesPerSec / p.SamplesPerSec
		add("ingest samples/s ÷ Prometheus", x, "(none; for reference)", true)
		x = t.BytesPerSample / p.BytesPerSample
		add("bytes/sample ÷ Prometheus", x, "≤ 0.3", x <= 0.3)
		x = t.HeapPerSeries / p.HeapPerSeries
		add("heap in use per series after ingest ÷ Prometheus", x, "≤ 0.3", x <= 0.3)
		x = t.QueryMedianSum / p.QueryMedianSum
		add("sum of query medians ÷ Prometheus", x, "≤ 0.25", x <= 0.25)
		addDashboard(add, t, p)
		for _, e := range r.Equality {
			if e.Kind == Tandem {
				add("query answers equal to Prometheus's", float64(e.Equal), fmt.Sprintf("= %d", e.Total), e.Equal == e.Total)
			}
		}
		for _, e := range r.BlocksEquality {
			if e.Kind == Tandem {
				add("query answers on blocks equal to Prometheus's", float64(e.Equal), fmt.Sprintf("= %d", e.Total), e.Equal == e.Total)
			}
		}
	}
}

// p90Within counts the queries whose p90 in t is at most limit times
// peer's (query by query, in the same order; failed ones do not count)
// and returns the largest ratio among all.
func p90Within(t, peer []QueryResult, limit float64) (n int, worst float64) {
	for i, q := range t {
		if i >= len(peer) || q.Error != "" || peer[i].Error != "" || peer[i].P90Ms <= 0 {
			continue
		}
		x := q.P90Ms / peer[i].P90Ms
		if x <= limit {
			n++
		}
		worst = max(worst, x)
	}
	return n, worst
}

// addDashboard adds tandem's dashboard throughput and tail latency against
// peer's, for reference, when both ran the dashboard refreshes.
func addDashboard(add func(string, float64, string, bool), t, peer *PeerResult) {
	if t.Dashboard == nil || peer.Dashboard == nil || peer.Dashboard.QueriesPerSec == 0 || peer.Dashboard.P99Ms == 0 {
		return
	}
	add("dashboard queries/s ÷ "+kindTitle(peer.Kind), t.Dashboard.QueriesPerSec/peer.Dashboard.QueriesPerSec, "(none; for reference)", true)
	add("dashboard request p99 ÷ "+kindTitle(peer.Kind), t.Dashboard.P99Ms/peer.Dashboard.P99Ms, "(none; for reference)", true)
}

// kindTitle is how the targets name a system.
func kindTitle(k Kind) string {
	switch k {
	case VictoriaMetrics:
		return "VictoriaMetrics"
	case Prometheus:
		return "Prometheus"
	}
	return string(k)
}

// Markdown writes the report as markdown tables.
func (r *Report) Markdown(w io.Writer) {
	fmt.Fprintf(w, "Run `%s` on %s, %s.\n\n", r.Command, r.Date, r.Machine)
	fmt.Fprintf(w, "Workload (%s): %d targets × %d series (%d series), one scrape every %s for %d scrapes: %d samples, "+
		"remote-write %d.0 in %d pre-encoded requests (%.1f MB on the wire) over %d shards; built in %.0f s before the timed phase.\n\n",
		r.Size, r.Targets, r.Series/max(r.Targets, 1), r.Series, r.Interval, r.Scrapes, r.Samples, r.Protocol, r.Requests,
		float64(r.WireBytes)/1e6, r.Shards, r.BuildSecs)
	if r.HistSamples > 0 {
		fmt.Fprintf(w, "Native-histogram workload: %d histogram samples (per target 10 schema-3 counter histograms, 2 schema-3 gauge histograms, "+
			"2 NHCB counter histograms) and %d float samples; VictoriaMetrics does not store Prometheus native histograms and is not run.\n\n",
			r.HistSamples, r.Samples-r.HistSamples)
	}
	if r.EntropyFloor > 0 {
		fmt.Fprintf(w, "Entropy of the generated values, a floor for any lossless encoding (gauges and counters given the generator's model; "+
			"histogram series, timestamps, labels and index counted as free): %.3f bytes/sample.\n\n", r.EntropyFloor)
	}
	var heads []string
	for _, p := range r.Results {
		heads = append(heads, fmt.Sprintf("%s %s", p.Kind, p.Version))
	}
	fmt.Fprintf(w, "| | %s |\n|---|%s\n", strings.Join(heads, " | "), strings.Repeat("---|", len(r.Results)))
	row := func(name string, f func(p PeerResult) string) { r.row(w, name, f) }
	row("ingest samples/s", func(p PeerResult) string { return fmt.Sprintf("%.0f", p.SamplesPerSec) })
	row("ingest wall time (s)", func(p PeerResult) string { return fmt.Sprintf("%.1f", p.IngestSeconds) })
	row("server CPU per sample (ns)", func(p PeerResult) string { return fmt.Sprintf("%.0f", p.CPUNsPerSample) })
	row("new series/s (the first scrape of every target, sent first)", func(p PeerResult) string { return fmt.Sprintf("%.0f", p.NewSeriesPerSec) })
	row("server CPU per new series (µs, its first sample included)", func(p PeerResult) string { return fmt.Sprintf("%.2f", p.CPUNsPerNewSeries/1e3) })
	row("peak RSS after ingest (MiB)", func(p PeerResult) string { return fmt.Sprintf("%.0f", float64(p.PeakRSSBytes)/(1<<20)) })
	row("Go heap in use after ingest (idle, after two GCs), bytes/series", func(p PeerResult) string { return fmt.Sprintf("%.0f", p.HeapPerSeries) })
	if r.HistSamples > 0 {
		row("server CPU per histogram sample (ns, floats' CPU included)", func(p PeerResult) string { return fmt.Sprintf("%.0f", p.CPUNsPerHistSample) })
		row("bytes on disk per histogram sample (floats' bytes included)", func(p PeerResult) string { return fmt.Sprintf("%.2f", p.BytesPerHistSample) })
	}
	row("bytes on disk per sample", func(p PeerResult) string { return fmt.Sprintf("%.3f", p.BytesPerSample) })
	row("bytes on disk (MB)", func(p PeerResult) string { return fmt.Sprintf("%.1f", float64(p.DiskBytes)/1e6) })
	row("retried requests", func(p PeerResult) string { return fmt.Sprintf("%d", p.Retries) })
	row("sum of query medians (ms)", func(p PeerResult) string { return fmt.Sprintf("%.1f", p.QueryMedianSum) })
	row("peak RSS after queries (MiB)", func(p PeerResult) string { return fmt.Sprintf("%.0f", float64(p.PeakRSSAfterAll)/(1<<20)) })
	blocks := func(name string, f func(b *BlocksResult) string) {
		row(name, func(p PeerResult) string {
			if p.OnBlocks == nil {
				return "-"
			}
			return f(p.OnBlocks)
		})
	}
	if r.anyOnBlocks() {
		blocks("restarted on the persisted data: ready after (s)", func(b *BlocksResult) string { return fmt.Sprintf("%.1f", b.OpenSeconds) })
		blocks("restarted: RSS when idle, peak after queries (MiB)", func(b *BlocksResult) string {
			return fmt.Sprintf("%.0f, %.0f", float64(b.OpenRSSBytes)/(1<<20), float64(b.PeakRSSBytes)/(1<<20))
		})
		blocks("restarted: sum of query medians (ms)", func(b *BlocksResult) string { return fmt.Sprintf("%.1f", b.QueryMedianSum) })
	}
	for _, p := range r.Results {
		if p.Error != "" {
			fmt.Fprintf(w, "\n%s failed: %s\n", p.Kind, p.Error)
		}
	}

	how := ""
	if r.Interleaved && len(r.Results) > 1 {
		how = ", the systems in turn run by run"
	}
	fmt.Fprintf(w, "\nQuery latency right after ingest, median / p90 of %d runs after one warm-up%s (ms):\n\n", r.QueryReps, how)
	r.queryTable(w, heads, HeadQueries)
	r.equalityMarkdown(w, r.Equality, HeadQueries)
	if r.anyOnBlocks() {
		fmt.Fprintf(w, "\nQuery latency in a process restarted on the persisted data (tandem and Prometheus: every sample in blocks; "+
			"VictoriaMetrics: its merged parts), median / p90 of %d runs after one warm-up%s (ms):\n\n", r.QueryReps, how)
		r.queryTable(w, heads, BlockQueries)
		r.equalityMarkdown(w, r.BlocksEquality, BlockQueries)
	}
	r.dashboardMarkdown(w, heads)

	if len(r.Goals) > 0 {
		fmt.Fprintf(w, "\nTargets (tandem against each peer, this run):\n\n| target | measured | goal | met |\n|---|---|---|---|\n")
		for _, t := range r.Goals {
			met := "yes"
			if !t.Met {
				met = "**no**"
			}
			fmt.Fprintf(w, "| %s | %.3g | %s | %s |\n", t.Name, t.Measured, t.Goal, met)
		}
	}
}

func (r *Report) anyOnBlocks() bool {
	for _, p := range r.Results {
		if p.OnBlocks != nil {
			return true
		}
	}
	return false
}

// queryTable writes the latency of the queries pick chooses, one row per query.
func (r *Report) queryTable(w io.Writer, heads []string, pick func(*PeerResult) []QueryResult) {
	fmt.Fprintf(w, "| query | %s |\n|---|%s\n", strings.Join(heads, " | "), strings.Repeat("---|", len(r.Results)))
	if len(r.Results) == 0 {
		return
	}
	for i, q := range pick(&r.Results[0]) {
		cells := make([]string, len(r.Results))
		for j := range r.Results {
			qs := pick(&r.Results[j])
			if i >= len(qs) {
				cells[j] = "-"
				continue
			}
			if pq := qs[i]; pq.Error != "" {
				cells[j] = "error: " + strings.ReplaceAll(pq.Error, "|", "\\|")
			} else {
				cells[j] = fmt.Sprintf("%.1f / %.1f", pq.MedianMs, pq.P90Ms)
			}
		}
		fmt.Fprintf(w, "| `%s` | %s |\n", strings.ReplaceAll(q.Name, "|", "\\|"), strings.Join(cells, " | "))
	}
}

// equalityMarkdown writes how the answers pick chooses compare with Prometheus's.
func (r *Report) equalityMarkdown(w io.Writer, eqs []Equality, pick func(*PeerResult) []QueryResult) {
	if len(eqs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nAnswers compared with Prometheus's (floats within %g relative):\n\n", r.Tolerance)
	var names []string
	for _, q := range pick(&r.Results[0]) {
		names = append(names, q.Name)
	}
	writeEquality(w, eqs, names)
}

// row writes one table row: name, then f of every system (error for a
// system that failed).
func (r *Report) row(w io.Writer, name string, f func(p PeerResult) string) {
	cells := make([]string, len(r.Results))
	for i, p := range r.Results {
		if p.Error != "" {
			cells[i] = "error"
			continue
		}
		cells[i] = f(p)
	}
	fmt.Fprintf(w, "| %s | %s |\n", name, strings.Join(cells, " | "))
}

// writeEquality lists how many answers of each system were equal and the
// differences, in the order of names.
func writeEquality(w io.Writer, eqs []Equality, names []string) {
	for _, e := range eqs {
		fmt.Fprintf(w, "- %s: %d of %d equal", e.Kind, e.Equal, e.Total)
		if len(e.Diffs) == 0 {
			fmt.Fprintln(w, ".")
			continue
		}
		fmt.Fprintln(w, "; differences:")
		for _, n := range names {
			if d, ok := e.Diffs[n]; ok {
				fmt.Fprintf(w, "  - `%s`: %s\n", n, d)
			}
		}
	}
}

// dashboardMarkdown writes the dashboard refreshes' tables, when they ran.
func (r *Report) dashboardMarkdown(w io.Writer, heads []string) {
	var first *DashboardResult
	for _, p := range r.Results {
		if first == nil && p.Dashboard != nil {
			first = p.Dashboard
		}
	}
	if first == nil {
		return
	}
	fmt.Fprintf(w, "\nDashboard refreshes: %d panels of one target at once (one request each), the target rotating; "+
		"one warm-up, then %d refreshes one after the other (none started after %s):\n\n", first.Panels, r.DashboardRefreshes, r.DashboardTimeout)
	fmt.Fprintf(w, "| | %s |\n|---|%s\n", strings.Join(heads, " | "), strings.Repeat("---|", len(r.Results)))
	row := func(name string, f func(d *DashboardResult) string) {
		r.row(w, name, func(p PeerResult) string {
			if p.Dashboard == nil {
				return "-"
			}
			return f(p.Dashboard)
		})
	}
	row("refreshes run", func(d *DashboardResult) string { return fmt.Sprintf("%d", d.Refreshes) })
	row("request latency p50 / p90 / p99 (ms)", func(d *DashboardResult) string {
		return fmt.Sprintf("%.1f / %.1f / %.1f", d.P50Ms, d.P90Ms, d.P99Ms)
	})
	row("refresh wall time p50 / p90 (ms)", func(d *DashboardResult) string {
		return fmt.Sprintf("%.1f / %.1f", d.RefreshP50Ms, d.RefreshP90Ms)
	})
	row("refreshes/s", func(d *DashboardResult) string { return fmt.Sprintf("%.1f", d.RefreshesPerSec) })
	row("queries/s", func(d *DashboardResult) string { return fmt.Sprintf("%.0f", d.QueriesPerSec) })
	row("server CPU per refresh (ms)", func(d *DashboardResult) string { return fmt.Sprintf("%.2f", d.CPUMsPerRefresh) })
	row("failed requests", func(d *DashboardResult) string { return fmt.Sprintf("%d", d.Errors) })

	fmt.Fprintf(w, "\nDashboard panels, median / p90 across refreshes (ms):\n\n")
	fmt.Fprintf(w, "| panel | %s |\n|---|%s\n", strings.Join(heads, " | "), strings.Repeat("---|", len(r.Results)))
	var names []string
	for i, ps := range first.PanelStats {
		names = append(names, ps.Name)
		row("`"+ps.Name+"`", func(d *DashboardResult) string {
			if i >= len(d.PanelStats) {
				return "-"
			}
			return fmt.Sprintf("%.1f / %.1f", d.PanelStats[i].MedianMs, d.PanelStats[i].P90Ms)
		})
	}
	if len(r.DashboardEquality) > 0 {
		fmt.Fprintf(w, "\nDashboard answers compared with %s's, refresh by refresh (lists sorted, floats within %g relative):\n\n", r.DashboardRef, r.Tolerance)
		writeEquality(w, r.DashboardEquality, names)
	}
}

package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"
)

// DashboardSet is one refresh of a node_exporter dashboard showing target
// (host-<target>:9100) over the last hour of w: stat panels (instant
// queries at the last scrape), graph panels (range queries aligned to their
// step as Grafana does: 15 s full-width, 30 s half-width) and the template
// variables' metadata calls. The float workload has no up series (Prometheus
// adds it when it scrapes; the generator replays expositions), so the status
// panel reads node_scrape_collector_success.
func DashboardSet(w *Workload, target int) []Query {
	end := w.MaxT / 1000
	start := end - 3600
	inst := fmt.Sprintf("host-%d:9100", target)
	sel := func(metric string) string { return fmt.Sprintf(`%s{job="node",instance=%q}`, metric, inst) }
	str := func(s int64) string { return strconv.FormatInt(s, 10) }
	instant := func(name, q string) Query {
		return Query{name, "/api/v1/query", url.Values{"query": {q}, "time": {str(end)}}}
	}
	graph := func(name, q string, step int64) Query {
		return Query{name, "/api/v1/query_range", url.Values{"query": {q}, "start": {str(start / step * step)},
			"end": {str(end / step * step)}, "step": {str(step)}}}
	}
	meta := func(name, path, match string) Query {
		return Query{name, path, url.Values{"match[]": {match}, "start": {str(start)}, "end": {str(end)}}}
	}
	cpu, rx, tx := sel("node_cpu_seconds_total"), sel("node_network_receive_bytes_total"), sel("node_network_transmit_bytes_total")
	return []Query{
		instant("status: collector success", sel("node_scrape_collector_success")),
		instant("uptime", fmt.Sprintf("time() - %s", sel("node_boot_time_seconds"))),
		instant("load1", sel("node_load1")),
		instant("memory available", sel("node_memory_MemAvailable_bytes")),
		instant("memory used %", fmt.Sprintf("100 * (1 - %s / %s)", sel("node_memory_MemAvailable_bytes"), sel("node_memory_MemTotal_bytes"))),
		instant("filesystem available", sel("node_filesystem_avail_bytes")),
		instant("CPU busy %", fmt.Sprintf(`100 * (1 - avg(rate(node_cpu_seconds_total{job="node",instance=%q,mode="idle"}[5m])))`, inst)),
		instant("CPU cores", fmt.Sprintf("count(count by(cpu)(%s))", cpu)),
		instant("network receive rate", fmt.Sprintf("sum by(device)(rate(%s[5m]))", rx)),
		graph("graph: CPU by mode", fmt.Sprintf("sum by(mode)(rate(%s[5m]))", cpu), 15),
		graph("graph: network receive", fmt.Sprintf("rate(%s[5m])", rx), 15),
		graph("graph: network transmit", fmt.Sprintf("rate(%s[5m])", tx), 15),
		graph("graph: load1", sel("node_load1"), 30),
		graph("graph: memory available", sel("node_memory_MemAvailable_bytes"), 30),
		graph("graph: disk read", fmt.Sprintf("rate(%s[5m])", sel("node_disk_read_bytes_total")), 30),
		graph("graph: disk written", fmt.Sprintf("rate(%s[5m])", sel("node_disk_written_bytes_total")), 30),
		graph("graph: filesystem available", sel("node_filesystem_avail_bytes"), 30),
		meta("series of the target's CPU", "/api/v1/series", cpu),
		meta("label names of the target", "/api/v1/labels", fmt.Sprintf(`{job="node",instance=%q}`, inst)),
		meta("variable $instance", "/api/v1/label/instance/values", `node_load1{job="node"}`),
		meta("variable $mode", "/api/v1/label/mode/values", cpu),
		meta("variable $device", "/api/v1/label/device/values", rx),
	}
}

// DashboardOptions configures RunDashboard.
type DashboardOptions struct {
	Refreshes int           // timed refreshes after one warm-up
	Timeout   time.Duration // no refresh starts after this much time (at least one runs); 0: no bound
}

// DashboardResult is the latency and throughput of repeated dashboard refreshes.
type DashboardResult struct {
	Refreshes       int     `json:"refreshes"` // timed refreshes run
	Panels          int     `json:"panels_per_refresh"`
	Requests        int     `json:"requests"` // timed requests answered
	Errors          int     `json:"errors"`
	FirstError      string  `json:"first_error,omitempty"`
	P50Ms           float64 `json:"request_p50_ms"`
	P90Ms           float64 `json:"request_p90_ms"`
	P99Ms           float64 `json:"request_p99_ms"`
	RefreshP50Ms    float64 `json:"refresh_p50_ms"` // wall time of a whole refresh
	RefreshP90Ms    float64 `json:"refresh_p90_ms"`
	Seconds         float64 `json:"seconds"` // wall time of the timed refreshes
	RefreshesPerSec float64 `json:"refreshes_per_second"`
	// CPUMsPerRefresh is the server's CPU time (user and system) over the
	// timed refreshes per refresh: steadier than refreshes/s on a shared
	// machine, whose neighbours take wall time but not the server's CPU.
	CPUMsPerRefresh float64      `json:"server_cpu_ms_per_refresh,omitempty"`
	QueriesPerSec   float64      `json:"queries_per_second"`
	PanelStats      []PanelStats `json:"panels"`
	answers         [][][]byte   // refresh → panel → body (nil on error)
}

// PanelStats is one panel's latency across the timed refreshes.
type PanelStats struct {
	Name     string  `json:"name"`
	MedianMs float64 `json:"median_ms"`
	P90Ms    float64 `json:"p90_ms"`
	Errors   int     `json:"errors"`
	// MinEntries is the fewest series (or list entries) of its answers.
	MinEntries int `json:"min_entries"`
}

// RunDashboard refreshes a dashboard (DashboardSet) against p: every panel
// of a refresh at once, one request each on a pool of kept-alive
// connections, refreshes one after the other with the target rotating over
// w's targets; one untimed warm-up refresh first.
func RunDashboard(ctx context.Context, p *Peer, w *Workload, o DashboardOptions) *DashboardResult {
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	defer client.CloseIdleConnections()
	refresh := func(qs []Query) ([]time.Duration, [][]byte, []error) {
		lat, bodies, errs := make([]time.Duration, len(qs)), make([][]byte, len(qs)), make([]error, len(qs))
		var wg sync.WaitGroup
		for i, q := range qs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				bodies[i], errs[i] = doQuery(ctx, client, p.URL(q.Path), q.Params)
				lat[i] = time.Since(t0)
			}()
		}
		wg.Wait()
		return lat, bodies, errs
	}
	refresh(DashboardSet(w, w.Targets-1))
	r := &DashboardResult{}
	var all, walls []float64
	var perPanel [][]float64
	cpu0, cpuErr := p.Proc()
	start := time.Now()
	for k := 0; k < o.Refreshes && ctx.Err() == nil; k++ {
		if k > 0 && o.Timeout > 0 && time.Since(start) >= o.Timeout {
			break
		}
		qs := DashboardSet(w, k%max(w.Targets, 1))
		if r.PanelStats == nil {
			r.Panels, r.PanelStats, perPanel = len(qs), make([]PanelStats, len(qs)), make([][]float64, len(qs))
			for i, q := range qs {
				r.PanelStats[i] = PanelStats{Name: q.Name, MinEntries: -1}
			}
		}
		t0 := time.Now()
		lat, bodies, errs := refresh(qs)
		walls = append(walls, ms(time.Since(t0)))
		for i, err := range errs {
			if err != nil {
				r.Errors++
				r.PanelStats[i].Errors++
				if r.FirstError == "" {
					r.FirstError = fmt.Sprintf("%s: %v", qs[i].Name, err)
				}
				continue
			}
			r.Requests++
			all = append(all, ms(lat[i]))
			perPanel[i] = append(perPanel[i], ms(lat[i]))
		}
		r.answers = append(r.answers, bodies)
		r.Refreshes++
	}
	r.Seconds = time.Since(start).Seconds()
	if cpu1, err := p.Proc(); err == nil && cpuErr == nil && r.Refreshes > 0 {
		r.CPUMsPerRefresh = (cpu1.CPUSeconds - cpu0.CPUSeconds) * 1000 / float64(r.Refreshes)
	}
	r.RefreshesPerSec = float64(r.Refreshes) / r.Seconds
	r.QueriesPerSec = float64(r.Requests) / r.Seconds
	r.P50Ms, r.P90Ms, r.P99Ms = quantiles(all, 0.5, 0.9, 0.99)
	r.RefreshP50Ms, r.RefreshP90Ms, _ = quantiles(walls, 0.5, 0.9, 0)
	for i := range r.PanelStats {
		ps := &r.PanelStats[i]
		ps.MedianMs, ps.P90Ms, _ = quantiles(perPanel[i], 0.5, 0.9, 0)
		for _, bodies := range r.answers {
			if n := entries(bodies[i]); bodies[i] != nil && (ps.MinEntries < 0 || n < ps.MinEntries) {
				ps.MinEntries = n
			}
		}
	}
	return r
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// quantiles of vs (unsorted; zeros when empty).
func quantiles(vs []float64, a, b, c float64) (float64, float64, float64) {
	if len(vs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(vs)
	sort.Float64s(s)
	return quantile(s, a), quantile(s, b), quantile(s, c)
}

// entries is the number of series (or list entries) of an answer, -1 if it
// does not decode.
func entries(body []byte) int {
	m, l, err := normalize(body)
	if err != nil {
		return -1
	}
	return len(m) + len(l)
}

// CompareDashboards compares every system's dashboard answers with ref's,
// refresh by refresh (the refreshes both ran; metadata lists sorted, floats
// within relative tolerance tol): Total counts the answers compared, Diffs
// holds per panel how many refreshes differ and the first difference.
func CompareDashboards(ref Kind, results []PeerResult, tol float64) []Equality {
	var refDash *DashboardResult
	for _, r := range results {
		if r.Kind == ref {
			refDash = r.Dashboard
		}
	}
	if refDash == nil {
		return nil
	}
	var out []Equality
	for _, r := range results {
		d := r.Dashboard
		if r.Kind == ref || d == nil {
			continue
		}
		e := Equality{Kind: r.Kind, Diffs: map[string]string{}}
		n := min(len(d.answers), len(refDash.answers))
		for i, ps := range d.PanelStats {
			var differ int
			var first string
			for k := range n {
				e.Total++
				a, b := d.answers[k][i], refDash.answers[k][i]
				diff := "error"
				if a != nil && b != nil {
					diff = Compare(a, b, tol)
				}
				if diff == "" {
					e.Equal++
					continue
				}
				if differ++; first == "" {
					first = fmt.Sprintf("refresh %d: %s", k, diff)
				}
			}
			if differ > 0 {
				e.Diffs[ps.Name] = fmt.Sprintf("%d of %d refreshes differ, first %s", differ, n, first)
			}
		}
		out = append(out, e)
	}
	return out
}

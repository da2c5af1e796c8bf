package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// PeerResult is everything measured of one system.
type PeerResult struct {
	Kind           Kind    `json:"system"`
	Version        string  `json:"version"`
	Samples        int64   `json:"samples"`
	IngestSeconds  float64 `json:"ingest_seconds"`
	SamplesPerSec  float64 `json:"samples_per_second"`
	CPUSeconds     float64 `json:"ingest_cpu_seconds"`
	CPUNsPerSample float64 `json:"cpu_ns_per_sample"`
	// Series creation: the first scrape of every target, sent as a phase
	// of its own before the rest (included in the ingest figures above).
	NewSeriesPerSec   float64 `json:"new_series_per_second,omitempty"`
	CPUNsPerNewSeries float64 `json:"cpu_ns_per_new_series,omitempty"`
	// Of the histogram workload: all ingest CPU (floats included) and all
	// bytes on disk per histogram sample.
	CPUNsPerHistSample float64          `json:"cpu_ns_per_histogram_sample,omitempty"`
	BytesPerHistSample float64          `json:"bytes_per_histogram_sample,omitempty"`
	PeakRSSBytes       int64            `json:"peak_rss_bytes"`
	HeapBytes          float64          `json:"heap_inuse_bytes"`
	HeapPerSeries      float64          `json:"heap_bytes_per_series"`
	HeapLiveBytes      float64          `json:"heap_live_bytes"` // objects alone (heap_alloc), beside the spans in use
	Retries            int64            `json:"retries"`
	DiskBytes          int64            `json:"disk_bytes"`
	BytesPerSample     float64          `json:"bytes_per_sample"`
	PersistSeconds     float64          `json:"persist_seconds"`
	Queries            []QueryResult    `json:"queries"`
	QueryMedianSum     float64          `json:"query_median_sum_ms"`
	Dashboard          *DashboardResult `json:"dashboard,omitempty"`
	PeakRSSAfterAll    int64            `json:"peak_rss_after_queries_bytes"`
	// OnBlocks is the query set again, in a new process of the system
	// opened on what Persist wrote (RunOptions.Blocks).
	OnBlocks *BlocksResult `json:"on_blocks,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// BlocksResult is the query set timed in a process restarted on the
// persisted data: tandem and Prometheus on their snapshot (every sample in
// blocks, the head empty), VictoriaMetrics on its flushed and merged parts.
type BlocksResult struct {
	OpenSeconds    float64       `json:"open_seconds"` // start until ready
	OpenRSSBytes   int64         `json:"open_rss_bytes"`
	Queries        []QueryResult `json:"queries"`
	QueryMedianSum float64       `json:"query_median_sum_ms"`
	PeakRSSBytes   int64         `json:"peak_rss_bytes"` // of the restarted process, after the queries
}

// RunOptions configures one benchmark run.
type RunOptions struct {
	WorkDir  string
	Binaries map[Kind]string // systems to run, in Order
	Order    []Kind
	Reps     int // timed runs per query
	Slack    int // batch rounds a shard may run ahead of the slowest
	Logger   *slog.Logger
	// ProfileDir, when set, receives pprof profiles of every system (all
	// three serve /debug/pprof): CPU during ingest (the first ProfileSeconds)
	// and during the queries, and the heap after ingest.
	ProfileDir     string
	ProfileSeconds int
	// Dashboard, when Refreshes > 0, runs the dashboard refreshes
	// (RunDashboard) after the query set.
	Dashboard DashboardOptions
	// Blocks, when set, restarts every system on its persisted data after
	// the queries and the dashboard and times the query set again (OnBlocks).
	Blocks bool
	// Interleave keeps every system running after its ingest and times
	// the query sets of all of them in turn, query by query (Run).
	Interleave bool
	// QueryDelay is how long every system is left alone between ingest (and
	// its background work) and the queries: a replay compressed into seconds
	// would otherwise be queried before any periodic maintenance ran.
	QueryDelay time.Duration
}

// member is one system of a run: started, replayed into, and kept running
// for the phases that follow.
type member struct {
	kind Kind
	bin  string
	p    *Peer
	res  PeerResult
	dir  string // what Persist wrote
}

// fail records err as the member's error and stops its process: the phases
// after this one leave it out.
func (m *member) fail(o RunOptions, phase string, err error) {
	o.Logger.Error("system failed", "system", m.kind, "phase", phase, "err", err)
	m.res.Error = fmt.Sprintf("%s: %v", phase, err)
	if m.p != nil {
		m.p.Stop()
		m.p = nil
	}
}

// Run measures the systems of order (binaries in bins) on w and qs. With
// o.Interleave every system is replayed into in turn and kept running, and
// each query phase then times the systems in turn, query by query and run
// by run, so that a change in the shared machine's speed weighs on all of
// them alike; without it each system goes through every phase alone, one
// system after the other.
func Run(ctx context.Context, order []Kind, bins map[Kind]string, w *Workload, qs []Query, o RunOptions) []PeerResult {
	if o.Interleave {
		return runTogether(ctx, order, bins, w, qs, o)
	}
	var out []PeerResult
	for _, k := range order {
		out = append(out, runTogether(ctx, []Kind{k}, bins, w, qs, o)...)
		if ctx.Err() != nil {
			break
		}
	}
	return out
}

// runTogether replays w into each system of order in turn, then runs the
// query phases on all of them at once (RunQueriesTogether), the dashboard
// refreshes one system after the other, and the query set again on blocks.
func runTogether(ctx context.Context, order []Kind, bins map[Kind]string, w *Workload, qs []Query, o RunOptions) []PeerResult {
	ms := make([]*member, len(order))
	defer func() {
		for _, m := range ms {
			if m.p != nil {
				m.p.Stop()
			}
		}
	}()
	for i, k := range order {
		ms[i] = &member{kind: k, bin: bins[k], res: PeerResult{Kind: k}}
		if ctx.Err() != nil {
			ms[i].res.Error = ctx.Err().Error()
			continue
		}
		if err := ms[i].ingest(ctx, w, o); err != nil {
			ms[i].fail(o, "ingest", err)
		}
	}
	live := func() (out []*member) {
		for _, m := range ms {
			if m.p != nil {
				out = append(out, m)
			}
		}
		return out
	}

	// The query set right after ingest.
	head := live()
	for _, m := range head {
		idle := waitIdle(ctx, m.p, time.Minute)
		o.Logger.Info("querying", "system", m.kind, "bytes_per_sample", strconv.FormatFloat(m.res.BytesPerSample, 'f', 3, 64),
			"waited_for_idle", idle.Round(100*time.Millisecond))
		// Allocations of the query phase: pprof -base <kind>-allocs-before-queries.pprof <kind>-allocs-after-queries.pprof.
		o.saveAllocs(ctx, m.p, "before")
	}
	stop := o.profileAll(ctx, head, "query.cpu")
	results := RunQueriesTogether(ctx, peersOf(head), qs, o.Reps)
	stop()
	for i, m := range head {
		o.saveAllocs(ctx, m.p, "after")
		m.res.Queries, m.res.QueryMedianSum = results[i], medianSum(results[i])
	}

	// Dashboard refreshes measure throughput under concurrency: one system
	// at a time.
	for _, m := range live() {
		if o.Dashboard.Refreshes > 0 {
			o.Logger.Info("refreshing the dashboard", "system", m.kind, "refreshes", o.Dashboard.Refreshes)
			stop := o.profile(ctx, m.p, "dashboard.cpu")
			m.res.Dashboard = RunDashboard(ctx, m.p, w, o.Dashboard)
			stop()
		}
		if end, err := m.p.Proc(); err == nil {
			m.res.PeakRSSAfterAll = end.HWMBytes
		}
	}
	if !o.Blocks {
		return resultsOf(ms)
	}

	// The query set again, every system restarted on what it persisted.
	for _, m := range live() {
		m.p.Stop()
		m.p = nil
		p, b, err := startOnBlocks(ctx, m.kind, m.bin, m.dir, o)
		if err != nil {
			m.fail(o, "queries on blocks", err)
			continue
		}
		m.p, m.res.OnBlocks = p, b
	}
	blocks := live()
	for _, m := range blocks {
		waitIdle(ctx, m.p, time.Minute)
		o.Logger.Info("querying blocks", "system", m.kind, "open_seconds", strconv.FormatFloat(m.res.OnBlocks.OpenSeconds, 'f', 1, 64))
	}
	stop = o.profileAll(ctx, blocks, "blocks-query.cpu")
	results = RunQueriesTogether(ctx, peersOf(blocks), qs, o.Reps)
	stop()
	for i, m := range blocks {
		b := m.res.OnBlocks
		b.Queries, b.QueryMedianSum = results[i], medianSum(results[i])
		if end, err := m.p.Proc(); err == nil {
			b.PeakRSSBytes = end.HWMBytes
		}
	}
	return resultsOf(ms)
}

// medianSum is the sum of the queries' medians.
func medianSum(qs []QueryResult) float64 {
	sum := 0.0
	for _, q := range qs {
		sum += q.MedianMs
	}
	return sum
}

func peersOf(ms []*member) []*Peer {
	ps := make([]*Peer, len(ms))
	for i, m := range ms {
		ps[i] = m.p
	}
	return ps
}

func resultsOf(ms []*member) []PeerResult {
	out := make([]PeerResult, len(ms))
	for i, m := range ms {
		out[i] = m.res
	}
	return out
}

// ingest starts the member's system, replays w into it, measures ingest,
// the heap and the persisted bytes, and leaves the process running and idle.
func (m *member) ingest(ctx context.Context, w *Workload, o RunOptions) error {
	kind, r := m.kind, &m.res
	p, err := StartPeer(ctx, PeerConfig{Kind: kind, Binary: m.bin, WorkDir: o.WorkDir})
	if err != nil {
		return err
	}
	m.p = p
	r.Version = p.Version
	before, err := p.Proc()
	if err != nil {
		return err
	}
	o.Logger.Info("ingesting", "system", kind, "version", p.Version, "samples", w.Samples)
	stopProf := o.profile(ctx, p, "ingest.cpu")
	var mid ProcStats
	sr, err := sendMeasured(ctx, p, w, o.Slack, &mid)
	stopProf()
	if err != nil {
		return err
	}
	after, err := p.Proc()
	if err != nil {
		return err
	}
	if sr.first.Duration > 0 {
		r.NewSeriesPerSec = float64(w.Series) / sr.first.Duration.Seconds()
		r.CPUNsPerNewSeries = (mid.CPUSeconds - before.CPUSeconds) * 1e9 / float64(w.Series)
	}
	r.Samples, r.Retries = sr.Samples, sr.Retries
	r.IngestSeconds = sr.Duration.Seconds()
	r.SamplesPerSec = float64(sr.Samples) / sr.Duration.Seconds()
	r.CPUSeconds = after.CPUSeconds - before.CPUSeconds
	r.CPUNsPerSample = r.CPUSeconds * 1e9 / float64(sr.Samples)
	if w.HistSamples > 0 {
		r.CPUNsPerHistSample = r.CPUSeconds * 1e9 / float64(w.HistSamples)
	}
	r.PeakRSSBytes = after.HWMBytes
	// The heap is read once the background work ingest started (a WAL
	// checkpoint, merges, head compaction) is done, and after a garbage
	// collection, in every system (all three are Go and serve pprof): it
	// counts what the system keeps, not the transient buffers of that work
	// nor the garbage its collector had left at that moment, nor pooled
	// request buffers.
	waitIdle(ctx, p, time.Minute)
	// Twice: sync.Pool contents survive one collection (as victims), and
	// how many request buffers were pooled at that moment is noise.
	forceGC(ctx, p, o.Logger)
	forceGC(ctx, p, o.Logger)
	if o.ProfileDir != "" {
		saveProfile(ctx, p, "/debug/pprof/heap", filepath.Join(o.ProfileDir, string(kind)+"-heap.pprof"), o.Logger)
	}
	if m, err := p.Metrics(ctx); err == nil {
		r.HeapBytes = metricValue(m, "go_memstats_heap_inuse_bytes")
		r.HeapLiveBytes = metricValue(m, "go_memstats_heap_alloc_bytes")
		r.HeapPerSeries = r.HeapBytes / float64(w.Series)
		if kind == Tandem {
			// Series stored apart from their group's shared timestamps
			// (members whose samples arrived out of step with the group's).
			o.Logger.Info("head layout", "system", kind,
				"aligned", metricValue(m, `tandem_head_members{layout="aligned"}`),
				"unaligned", metricValue(m, `tandem_head_members{layout="unaligned"}`))
		}
	}
	o.Logger.Info("persisting", "system", kind, "samples_per_second", int64(r.SamplesPerSec))
	t0 := time.Now()
	persisted, err := p.Persist(ctx)
	if err != nil {
		return fmt.Errorf("persist: %w", err)
	}
	m.dir = persisted.Dir
	r.DiskBytes = persisted.Bytes
	r.PersistSeconds = time.Since(t0).Seconds()
	r.BytesPerSample = float64(r.DiskBytes) / float64(w.Samples)
	if w.HistSamples > 0 {
		r.BytesPerHistSample = float64(r.DiskBytes) / float64(w.HistSamples)
	}
	// Background work that ingest started (merges, compaction, a WAL
	// checkpoint) finishes before the next system ingests and before the
	// queries are timed, for every system.
	waitIdle(ctx, p, time.Minute)
	if o.QueryDelay > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.QueryDelay):
		}
		if kind == Tandem {
			if m, err := p.Metrics(ctx); err == nil {
				o.Logger.Info("head layout before queries", "system", kind,
					"unaligned", metricValue(m, `tandem_head_members{layout="unaligned"}`),
					"realigned_samples", metricValue(m, "tandem_head_realigned_samples_total"))
			}
		}
	}
	return nil
}

// startOnBlocks starts kind on dir, the data a stopped process persisted,
// and waits until it is idle.
func startOnBlocks(ctx context.Context, kind Kind, bin, dir string, o RunOptions) (*Peer, *BlocksResult, error) {
	o.Logger.Info("restarting on the persisted data", "system", kind, "dir", dir)
	t0 := time.Now()
	p, err := StartPeer(ctx, PeerConfig{Kind: kind, Binary: bin, WorkDir: o.WorkDir, DataDir: dir})
	if err != nil {
		return nil, nil, err
	}
	b := &BlocksResult{OpenSeconds: time.Since(t0).Seconds()}
	// Startup work (Prometheus compacts the snapshot's blocks) ends first.
	waitIdle(ctx, p, time.Minute)
	if st, err := p.Proc(); err == nil {
		b.OpenRSSBytes = st.RSSBytes
	}
	if kind == Tandem {
		// Nothing to query in the head: the snapshot is blocks alone.
		if m, err := p.Metrics(ctx); err == nil {
			if n := metricValue(m, `tandem_head_members{layout="aligned"}`) + metricValue(m, `tandem_head_members{layout="unaligned"}`); n > 0 {
				p.Stop()
				return nil, nil, fmt.Errorf("the head holds %v series after a restart on a snapshot", n)
			}
		}
	}
	return p, b, nil
}

// phasedSend is a replay in two phases: the series-creating first scrape
// of every target, then the rest; the embedded result is their sum.
type phasedSend struct {
	SendResult
	first SendResult
}

// sendMeasured replays w into p, the first scrape of every target
// (Workload.First) first, reading p's process statistics into mid between
// the phases.
func sendMeasured(ctx context.Context, p *Peer, w *Workload, slack int, mid *ProcStats) (phasedSend, error) {
	url := p.URL(p.WritePath())
	if w.First == nil {
		sr, err := Send(ctx, url, w, slack)
		return phasedSend{SendResult: sr}, err
	}
	first, err := sendRange(ctx, url, w, slack, func(sh int) (int, int) { return 0, w.First[sh] })
	if err != nil {
		return phasedSend{SendResult: first}, err
	}
	if *mid, err = p.Proc(); err != nil {
		return phasedSend{SendResult: first}, err
	}
	rest, err := sendRange(ctx, url, w, slack, func(sh int) (int, int) { return w.First[sh], -1 })
	return phasedSend{first: first, SendResult: SendResult{
		Duration: first.Duration + rest.Duration,
		Requests: first.Requests + rest.Requests,
		Samples:  first.Samples + rest.Samples,
		Retries:  first.Retries + rest.Retries,
	}}, err
}

// profile starts a CPU profile of the peer in the background; the returned
// function waits for it to be saved.
func (o RunOptions) profile(ctx context.Context, p *Peer, name string) func() {
	if o.ProfileDir == "" {
		return func() {}
	}
	secs := max(o.ProfileSeconds, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		saveProfile(ctx, p, fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs),
			filepath.Join(o.ProfileDir, fmt.Sprintf("%s-%s.pprof", p.Kind, name)), o.Logger)
	}()
	return func() { <-done }
}

// profileAll starts a CPU profile of every member at once; the returned
// function waits for them all to be saved.
func (o RunOptions) profileAll(ctx context.Context, ms []*member, name string) func() {
	stops := make([]func(), len(ms))
	for i, m := range ms {
		stops[i] = o.profile(ctx, m.p, name)
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
	}
}

// saveAllocs saves p's cumulative allocation profile, when profiles are on.
func (o RunOptions) saveAllocs(ctx context.Context, p *Peer, when string) {
	if o.ProfileDir != "" {
		saveProfile(ctx, p, "/debug/pprof/allocs", filepath.Join(o.ProfileDir, string(p.Kind)+"-allocs-"+when+"-queries.pprof"), o.Logger)
	}
}

func saveProfile(ctx context.Context, p *Peer, path, file string, logger *slog.Logger) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL(path), nil)
	if err == nil {
		var resp *http.Response
		if resp, err = http.DefaultClient.Do(req); err == nil {
			defer resp.Body.Close()
			var b []byte
			if b, err = io.ReadAll(resp.Body); err == nil {
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("%s", resp.Status)
				} else {
					err = os.WriteFile(file, b, 0o644)
				}
			}
		}
	}
	if err != nil {
		logger.Warn("profile failed", "system", p.Kind, "path", path, "err", err)
	}
}

// forceGC makes p collect garbage: pprof's heap endpoint runs a collection
// before it writes the profile when asked with gc=1.
func forceGC(ctx context.Context, p *Peer, logger *slog.Logger) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL("/debug/pprof/heap?gc=1"), nil)
	if err == nil {
		var resp *http.Response
		if resp, err = http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%s", resp.Status)
			}
		}
	}
	if err != nil {
		logger.Warn("forcing a garbage collection failed; heap includes garbage", "system", p.Kind, "err", err)
	}
}

// waitIdle waits until p has used less than a tenth of a core for a second
// (two half-second polls), at most limit, and returns how long it waited.
func waitIdle(ctx context.Context, p *Peer, limit time.Duration) time.Duration {
	start := time.Now()
	prev, err := p.Proc()
	if err != nil {
		return 0
	}
	for quiet := 0; quiet < 2 && time.Since(start) < limit; {
		select {
		case <-ctx.Done():
			return time.Since(start)
		case <-time.After(500 * time.Millisecond):
		}
		cur, err := p.Proc()
		if err != nil {
			return time.Since(start)
		}
		if cur.CPUSeconds-prev.CPUSeconds < 0.05 {
			quiet++
		} else {
			quiet = 0
		}
		prev = cur
	}
	return time.Since(start)
}

func metricValue(text, name string) float64 {
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, name+" ") {
			v, _ := strconv.ParseFloat(strings.TrimSpace(line[len(name)+1:]), 64)
			return v
		}
	}
	return 0
}

// Equality is how one system's answers compare with Prometheus's.
type Equality struct {
	Kind  Kind              `json:"system"`
	Diffs map[string]string `json:"differences"` // query name → difference; absent when equal
	Equal int               `json:"equal"`
	Total int               `json:"total"`
}

// HeadQueries picks the query set's results timed right after ingest.
func HeadQueries(r *PeerResult) []QueryResult { return r.Queries }

// BlockQueries picks the query set's results timed on blocks (none when
// that phase did not run).
func BlockQueries(r *PeerResult) []QueryResult {
	if r.OnBlocks == nil {
		return nil
	}
	return r.OnBlocks.Queries
}

// CompareWith compares every system's answers, as pick chooses them, with
// the reference system's.
func CompareWith(ref Kind, results []PeerResult, tol float64, pick func(*PeerResult) []QueryResult) []Equality {
	var refRes *PeerResult
	for i := range results {
		if results[i].Kind == ref {
			refRes = &results[i]
		}
	}
	if refRes == nil {
		return nil
	}
	var out []Equality
	for _, r := range results {
		if r.Kind == ref {
			continue
		}
		e := Equality{Kind: r.Kind, Diffs: map[string]string{}}
		qs, refQs := pick(&r), pick(refRes)
		for i, q := range qs {
			if i >= len(refQs) {
				break
			}
			e.Total++
			rq := refQs[i]
			switch {
			case q.Error != "" || rq.Error != "":
				e.Diffs[q.Name] = fmt.Sprintf("error: %q vs %q", q.Error, rq.Error)
			default:
				if d := Compare(q.body, rq.body, tol); d != "" {
					e.Diffs[q.Name] = d
				} else {
					e.Equal++
				}
			}
		}
		out = append(out, e)
	}
	return out
}

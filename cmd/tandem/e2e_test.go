package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	promqlengine "github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	promtsdb "github.com/prometheus/prometheus/tsdb"

	"github.com/tandem-tsdb/tandem/workload"
)

// tandemBin is the binary built once by TestMain.
var tandemBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tandem-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tandemBin = filepath.Join(dir, "tandem")
	out, err := exec.Command("go", "build", "-o", tandemBin, "github.com/tandem-tsdb/tandem/cmd/tandem").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build tandem: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// tandemProc is a tandem process started by a test.
type tandemProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	dir    string
	log    *bytes.Buffer
	waited chan struct{}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startTandem starts tandem on dataDir and waits for /-/ready.
func startTandem(t *testing.T, dataDir string, args ...string) *tandemProc {
	t.Helper()
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p := &tandemProc{t: t, url: "http://" + addr, dir: dataDir, log: &bytes.Buffer{}, waited: make(chan struct{})}
	p.cmd = exec.Command(tandemBin, append([]string{"--web.listen-address=" + addr, "--storage.path=" + dataDir, "--log.level=warn"}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.waited) }()
	t.Cleanup(func() { p.signal(syscall.SIGKILL) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-p.waited:
			t.Fatalf("tandem exited before ready: %v\n%s", p.cmd.ProcessState, p.log)
		default:
		}
		resp, err := http.Get(p.url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("tandem not ready after 30s\n%s", p.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// signal sends sig and waits for the process to exit.
func (p *tandemProc) signal(sig syscall.Signal) {
	select {
	case <-p.waited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.waited:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.waited
		p.t.Errorf("tandem did not exit on %v", sig)
	}
}

// apiResponse is the Prometheus HTTP API envelope.
type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

// api calls path with params (GET, or POST form when post) and decodes data into out.
func (p *tandemProc) api(t *testing.T, path string, params url.Values, post bool, out any) {
	t.Helper()
	var (
		resp *http.Response
		err  error
	)
	if post {
		resp, err = http.PostForm(p.url+path, params)
	} else {
		resp, err = http.Get(p.url + path + "?" + params.Encode())
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		t.Fatalf("%s %v: HTTP %d, %v: %s", path, params, resp.StatusCode, err, body)
	}
	if err := json.Unmarshal(r.Data, out); err != nil {
		t.Fatalf("%s: decode data: %v: %s", path, err, r.Data)
	}
}

// series is a canonical query result: a label set and its points.
type series struct {
	Labels string
	T      []int64
	V      []float64
	// HT and H are the series' native histogram points: times and each
	// histogram's JSON as the API wrote it (compared exactly).
	HT []int64
	H  []string
}

type queryData struct {
	ResultType string          `json:"resultType"`
	Result     json.RawMessage `json:"result"`
}

func parsePoint(t *testing.T, p []any) (int64, float64) {
	t.Helper()
	ts, ok := p[0].(float64)
	s, ok2 := p[1].(string)
	if !ok || !ok2 {
		t.Fatalf("bad point %v", p)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("bad value %q", s)
	}
	return int64(math.Round(ts * 1000)), v
}

// decodeResult turns a query's data into canonical series sorted by labels.
func decodeResult(t *testing.T, d queryData) []series {
	t.Helper()
	var out []series
	switch d.ResultType {
	case "vector", "matrix":
		var rs []struct {
			Metric     map[string]string   `json:"metric"`
			Value      []any               `json:"value"`
			Values     [][]any             `json:"values"`
			Histogram  []json.RawMessage   `json:"histogram"`
			Histograms [][]json.RawMessage `json:"histograms"`
		}
		if err := json.Unmarshal(d.Result, &rs); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			s := series{Labels: labels.FromMap(r.Metric).String()}
			pts := r.Values
			if r.Value != nil {
				pts = [][]any{r.Value}
			}
			for _, p := range pts {
				ts, v := parsePoint(t, p)
				s.T, s.V = append(s.T, ts), append(s.V, v)
			}
			hpts := r.Histograms
			if r.Histogram != nil {
				hpts = [][]json.RawMessage{r.Histogram}
			}
			for _, p := range hpts {
				var ts float64
				if len(p) != 2 || json.Unmarshal(p[0], &ts) != nil {
					t.Fatalf("bad histogram point %s", p)
				}
				s.HT, s.H = append(s.HT, int64(math.Round(ts*1000))), append(s.H, string(p[1]))
			}
			out = append(out, s)
		}
	case "scalar":
		var p []any
		if err := json.Unmarshal(d.Result, &p); err != nil {
			t.Fatal(err)
		}
		ts, v := parsePoint(t, p)
		out = append(out, series{T: []int64{ts}, V: []float64{v}})
	default:
		t.Fatalf("unexpected result type %q", d.ResultType)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Labels < out[b].Labels })
	return out
}

// fromPromQL turns a Prometheus engine result into canonical series.
func fromPromQL(t *testing.T, res *promqlengine.Result) []series {
	t.Helper()
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	var out []series
	switch v := res.Value.(type) {
	case promqlengine.Vector:
		for _, s := range v {
			out = append(out, series{Labels: s.Metric.String(), T: []int64{s.T}, V: []float64{s.F}})
		}
	case promqlengine.Matrix:
		for _, s := range v {
			c := series{Labels: s.Metric.String()}
			for _, p := range s.Floats {
				c.T, c.V = append(c.T, p.T), append(c.V, p.F)
			}
			out = append(out, c)
		}
	case promqlengine.Scalar:
		out = append(out, series{T: []int64{v.T}, V: []float64{v.V}})
	default:
		t.Fatalf("unexpected value %T", v)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Labels < out[b].Labels })
	return out
}

func floatEq(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	if a == b {
		return true
	}
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

func compareSeries(t *testing.T, what string, got, want []series) {
	t.Helper()
	if len(want) == 0 {
		t.Errorf("%s: reference result is empty; the query tests nothing", what)
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d series, want %d\n got: %v\nwant: %v", what, len(got), len(want), labelsOf(got), labelsOf(want))
		return
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Labels != w.Labels || !slices.Equal(g.T, w.T) {
			t.Errorf("%s: series %d: got %s at %v = %v, want %s at %v = %v", what, i, g.Labels, g.T, g.V, w.Labels, w.T, w.V)
			return
		}
		for j := range w.V {
			if !floatEq(g.V[j], w.V[j]) {
				t.Errorf("%s: %s at %d: got %v, want %v", what, w.Labels, w.T[j], g.V[j], w.V[j])
				return
			}
		}
		if !slices.Equal(g.HT, w.HT) {
			t.Errorf("%s: %s: histograms at %v, want at %v", what, w.Labels, g.HT, w.HT)
			return
		}
		for j := range w.H {
			if g.H[j] != w.H[j] {
				t.Errorf("%s: %s at %d: got histogram %s, want %s", what, w.Labels, w.HT[j], g.H[j], w.H[j])
				return
			}
		}
	}
}

func labelsOf(ss []series) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Labels)
	}
	return out
}

func fmtTime(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64) }

// loadReference appends scrapes into a fresh Prometheus TSDB.
func loadReference(t *testing.T, scrapes []workload.Scrape) *promtsdb.DB {
	t.Helper()
	opts := promtsdb.DefaultOptions()
	db, err := promtsdb.Open(t.TempDir(), nil, nil, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	app := db.Appender(context.Background())
	for _, sc := range scrapes {
		for _, s := range sc.Samples {
			if _, err := app.Append(0, s.Labels, sc.T, s.V); err != nil {
				t.Fatalf("reference append %s@%d: %v", s.Labels, sc.T, err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestEndToEnd sends a node_exporter-like workload to a real tandem process
// with the sharded remote-write sender and compares the HTTP API's answers
// with those of Prometheus' own TSDB and engine over the same samples.
func TestEndToEnd(t *testing.T) {
	const (
		targets  = 10
		nScrapes = 40
		interval = 15 * time.Second
	)
	cases := []struct {
		version  int
		lockstep bool // shards advance together (live sending) or race (a backlog)
	}{{1, true}, {2, true}, {1, false}}
	for _, tc := range cases {
		version := tc.version
		name := fmt.Sprintf("v%d", version)
		if !tc.lockstep {
			name += "-backlog"
		}
		t.Run(name, func(t *testing.T) {
			start := time.Now().Add(-nScrapes * interval).Truncate(time.Second)
			scrapes, err := workload.Generate(workload.Options{
				Targets: targets, Scrapes: nScrapes, Interval: interval, Start: start,
				Seed: uint64(version), Histogram: true, JitterTargets: 1, Jitter: 1500 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			perTarget := len(scrapes[0].Samples)
			p := startTandem(t, t.TempDir())
			ref := loadReference(t, scrapes)

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			sent := time.Now()
			sendOpts := workload.SendOptions{Version: version, Shards: 4, MaxSamplesPerSend: 2000, Lockstep: tc.lockstep}
			reqs, err := workload.BuildRequests(scrapes, sendOpts)
			if err != nil {
				t.Fatal(err)
			}
			st, err := workload.SendRequests(ctx, p.url+"/api/v1/write", reqs, sendOpts)
			if err != nil {
				t.Fatalf("send: %v\n%s", err, p.log)
			}
			want := int64(targets * nScrapes * perTarget)
			if st.Samples != want {
				t.Fatalf("sent %d samples, want %d", st.Samples, want)
			}
			t.Logf("sent %d samples in %d requests (%d retries) in %v", st.Samples, st.Requests, st.Retries, time.Since(sent))

			first, last := scrapes[0].T, scrapes[len(scrapes)-1].T
			engine := promqlengine.NewEngine(promqlengine.EngineOpts{
				MaxSamples: 50_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute,
			})
			instant := []string{
				`sum by (instance) (rate(node_cpu_seconds_total[1m]))`,
				`sum by (mode) (irate(node_cpu_seconds_total[1m]))`,
				`sum by (instance) (increase(node_network_receive_bytes_total[5m]))`,
				`histogram_quantile(0.9, sum by (le) (rate(promhttp_metric_handler_request_duration_seconds_bucket[5m])))`,
				`count by (job) ({__name__=~"node_.*"})`,
				`topk(3, sum by (instance) (rate(node_cpu_seconds_total{mode!="idle"}[2m])))`,
				`avg_over_time(node_load1[5m])`,
				`max_over_time(node_memory_MemAvailable_bytes[3m])`,
				`node_load1`,
				`sum(up) or vector(1)`,
			}
			times := []int64{first + 5*60_000, first + (last-first)/2 + 7_000, last, last + 20_000}
			for i, q := range instant {
				for j, ts := range times {
					post := (i+j)%2 == 1
					var d queryData
					p.api(t, "/api/v1/query", url.Values{"query": {q}, "time": {fmtTime(ts)}}, post, &d)
					qry, err := engine.NewInstantQuery(ctx, ref, nil, q, time.UnixMilli(ts))
					if err != nil {
						t.Fatal(err)
					}
					compareSeries(t, fmt.Sprintf("instant %s @%d", q, ts), decodeResult(t, d), fromPromQL(t, qry.Exec(ctx)))
					qry.Close()
				}
			}
			ranged := []string{
				`sum by (instance) (rate(node_cpu_seconds_total[1m]))`,
				`sum by (mode) (increase(node_cpu_seconds_total[2m]))`,
				`histogram_quantile(0.9, sum by (le) (rate(promhttp_metric_handler_request_duration_seconds_bucket[5m])))`,
				`count by (job) ({__name__=~"node_.*"})`,
				`topk(2, node_load5)`,
				`max_over_time(node_load1[2m])`,
				`node_filefd_allocated`,
			}
			step := 37 * time.Second
			for i, q := range ranged {
				var d queryData
				params := url.Values{"query": {q}, "start": {fmtTime(first)}, "end": {fmtTime(last)}, "step": {strconv.Itoa(int(step.Seconds()))}}
				p.api(t, "/api/v1/query_range", params, i%2 == 0, &d)
				qry, err := engine.NewRangeQuery(ctx, ref, nil, q, time.UnixMilli(first), time.UnixMilli(last), step)
				if err != nil {
					t.Fatal(err)
				}
				compareSeries(t, "range "+q, decodeResult(t, d), fromPromQL(t, qry.Exec(ctx)))
				qry.Close()
			}

			compareMetadataAPIs(t, p, ref, first, last)
			// Shards send in lockstep and jitter is target-wide, so every member,
			// the jittered target's too, should share its group's timestamps.
			alignedAtLeast := targets * perTarget
			if !tc.lockstep {
				// Racing shards leave members behind their group's sealed rows
				// (stored unaligned); once caught up they must rejoin.
				alignedAtLeast = alignedAtLeast * 9 / 10
			}
			checkHeadMetrics(t, p, targets*perTarget, alignedAtLeast)
			var gs struct {
				Groups       int `json:"groups"`
				Series       int `json:"series"`
				TopByMembers []struct {
					Key     string `json:"key"`
					Members int    `json:"members"`
				} `json:"topByMembers"`
			}
			p.api(t, "/api/v1/status/groups", url.Values{"limit": {"3"}}, false, &gs)
			if gs.Groups != targets || gs.Series != targets*perTarget || len(gs.TopByMembers) != 3 || gs.TopByMembers[0].Members != perTarget {
				t.Errorf("status/groups: %+v", gs)
			}
		})
	}
}

// compareMetadataAPIs compares /api/v1/series, /labels and /label/instance/values.
func compareMetadataAPIs(t *testing.T, p *tandemProc, ref *promtsdb.DB, first, last int64) {
	t.Helper()
	q, err := ref.Querier(first, last)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	for _, m := range []string{`node_cpu_seconds_total{mode="idle"}`, `{__name__=~"node_network_.*_bytes_total", device!="lo"}`, `{instance="host-9:9100", __name__=~"go_.*"}`} {
		var got []map[string]string
		p.api(t, "/api/v1/series", url.Values{"match[]": {m}, "start": {fmtTime(first)}, "end": {fmtTime(last)}}, false, &got)
		var gotS []string
		for _, g := range got {
			gotS = append(gotS, labels.FromMap(g).String())
		}
		sort.Strings(gotS)
		ms, err := parseMatchers(m)
		if err != nil {
			t.Fatal(err)
		}
		ss := q.Select(ctx, true, nil, ms...)
		var wantS []string
		for ss.Next() {
			wantS = append(wantS, ss.At().Labels().String())
		}
		if ss.Err() != nil {
			t.Fatal(ss.Err())
		}
		sort.Strings(wantS)
		if len(wantS) == 0 || !slices.Equal(gotS, wantS) {
			t.Errorf("series %s: got %d %v\nwant %d %v", m, len(gotS), gotS, len(wantS), wantS)
		}
	}
	var names []string
	p.api(t, "/api/v1/labels", url.Values{"start": {fmtTime(first)}, "end": {fmtTime(last)}}, false, &names)
	wantNames, _, err := q.LabelNames(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, wantNames) {
		t.Errorf("labels: got %v, want %v", names, wantNames)
	}
	var values []string
	p.api(t, "/api/v1/label/instance/values", url.Values{}, false, &values)
	wantValues, _, err := q.LabelValues(ctx, "instance", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(wantValues) != 10 || !slices.Equal(values, wantValues) {
		t.Errorf("instance values: got %v, want %v", values, wantValues)
	}
}

func parseMatchers(s string) ([]*labels.Matcher, error) {
	ms, err := parser.NewParser(parser.Options{}).ParseMetricSelector(s)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", s, err)
	}
	return ms, nil
}

// scrapeMetrics returns the samples of tandem's /metrics keyed by series text.
func scrapeMetrics(t *testing.T, p *tandemProc) map[string]float64 {
	t.Helper()
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

func checkHeadMetrics(t *testing.T, p *tandemProc, series, alignedAtLeast int) {
	t.Helper()
	m := scrapeMetrics(t, p)
	if got := m["tandem_head_series"]; got != float64(series) {
		t.Errorf("tandem_head_series = %v, want %d", got, series)
	}
	aligned, ok := m[`tandem_head_members{layout="aligned"}`]
	unaligned := m[`tandem_head_members{layout="unaligned"}`]
	if !ok || aligned < float64(alignedAtLeast) || aligned+unaligned != float64(series) {
		t.Errorf("tandem_head_members aligned=%v unaligned=%v, want aligned >= %d and a total of %d", aligned, unaligned, alignedAtLeast, series)
	}
	t.Logf("head members: aligned=%v unaligned=%v", aligned, unaligned)
}

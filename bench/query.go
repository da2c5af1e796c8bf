package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Query is one request of the query set.
type Query struct {
	Name   string
	Path   string // /api/v1/query, /api/v1/query_range, /api/v1/series, /api/v1/labels
	Params url.Values
}

// QuerySet is the query set of the benchmark over w's time span: range
// queries step 60 s, instant queries at the last scrape.
func QuerySet(w *Workload) []Query {
	end := w.MaxT / 1000
	start := w.MinT / 1000
	hour := end - 3600
	str := func(s int64) string { return strconv.FormatInt(s, 10) }
	rng := func(q string, from int64) url.Values {
		return url.Values{"query": {q}, "start": {str(from)}, "end": {str(end)}, "step": {"60"}}
	}
	inst := func(q string) url.Values { return url.Values{"query": {q}, "time": {str(end)}} }
	span := time.Duration(end-start) * time.Second
	return []Query{
		{"sum by(instance)(rate(cpu[5m])) 1h", "/api/v1/query_range", rng(`sum by(instance)(rate(node_cpu_seconds_total[5m]))`, hour)},
		{"sum by(instance)(rate(cpu[5m])) full span", "/api/v1/query_range", rng(`sum by(instance)(rate(node_cpu_seconds_total[5m]))`, start)},
		{"sum by(mode)(rate(cpu[5m])) full span", "/api/v1/query_range", rng(`sum by(mode)(rate(node_cpu_seconds_total[5m]))`, start)},
		{"histogram_quantile(0.9, ...) full span", "/api/v1/query_range", rng(`histogram_quantile(0.9, sum by(le)(rate(promhttp_metric_handler_request_duration_seconds_bucket[5m])))`, start)},
		{`count by(job)({__name__=~"node_.*"})`, "/api/v1/query", inst(`count by(job)({__name__=~"node_.*"})`)},
		{"avg by(instance)(MemAvailable) full span", "/api/v1/query_range", rng(`avg by(instance)(node_memory_MemAvailable_bytes)`, start)},
		{"max_over_time(one series[span])", "/api/v1/query", inst(fmt.Sprintf(`max_over_time(node_load1{instance="host-0:9100"}[%ds])`, int64(span.Seconds())+1))},
		{"/api/v1/series one target", "/api/v1/series", url.Values{"match[]": {`{instance="host-1:9100"}`}, "start": {str(start)}, "end": {str(end)}}},
		{"/api/v1/labels", "/api/v1/labels", url.Values{"start": {str(start)}, "end": {str(end)}}},
	}
}

// HistogramQuerySet is the query set of the native-histogram workload over
// w's whole span, step 60 s (the last query returns histograms, compared
// bucket by bucket).
func HistogramQuerySet(w *Workload) []Query {
	end := w.MaxT / 1000
	start := w.MinT / 1000
	str := func(s int64) string { return strconv.FormatInt(s, 10) }
	rng := func(q string, from int64) url.Values {
		return url.Values{"query": {q}, "start": {str(from)}, "end": {str(end)}, "step": {"60"}}
	}
	return []Query{
		{"histogram_quantile(0.9, sum by (instance) (rate(rpc[5m])))", "/api/v1/query_range", rng(`histogram_quantile(0.9, sum by (instance) (rate(rpc_duration_seconds[5m])))`, start)},
		{"histogram_quantile(0.99, sum(rate(rpc[5m])))", "/api/v1/query_range", rng(`histogram_quantile(0.99, sum(rate(rpc_duration_seconds[5m])))`, start)},
		{"NHCB: histogram_quantile(0.9, sum by (instance) (rate(http[5m])))", "/api/v1/query_range", rng(`histogram_quantile(0.9, sum by (instance) (rate(http_request_duration_seconds[5m])))`, start)},
		{"NHCB: histogram_quantile(0.99, sum(rate(http[5m])))", "/api/v1/query_range", rng(`histogram_quantile(0.99, sum(rate(http_request_duration_seconds[5m])))`, start)},
		{"histogram_count(rate(rpc[5m]))", "/api/v1/query_range", rng(`histogram_count(rate(rpc_duration_seconds[5m]))`, start)},
		{"gauge: histogram_quantile(0.5, sum by (queue) (queue_wait))", "/api/v1/query_range", rng(`histogram_quantile(0.5, sum by (queue) (queue_wait_seconds))`, start)},
		{"sum(rate(rpc{method=\"m3\"}[5m])) (histograms)", "/api/v1/query_range", rng(`sum(rate(rpc_duration_seconds{method="m3"}[5m]))`, start)},
	}
}

// QueryResult is one query's latency over repeated runs and its last answer.
type QueryResult struct {
	Name     string    `json:"name"`
	MedianMs float64   `json:"median_ms"`
	P90Ms    float64   `json:"p90_ms"`
	Runs     []float64 `json:"runs_ms"`
	Error    string    `json:"error,omitempty"`
	Points   int       `json:"points"` // samples in the last answer (a histogram counts its count, sum and buckets); -1 for lists
	body     []byte
}

// RunQueriesTogether times qs on every system of ps, query by query: each
// run of a query (one warm-up, then reps) goes to every system in turn, the
// first of them rotating from run to run, so that the systems' latencies of
// one query are taken within moments of each other. It returns each
// system's results, in the order of ps.
func RunQueriesTogether(ctx context.Context, ps []*Peer, qs []Query, reps int) [][]QueryResult {
	out := make([][]QueryResult, len(ps))
	for j := range ps {
		out[j] = make([]QueryResult, len(qs))
	}
	client := &http.Client{Timeout: 5 * time.Minute}
	for i, q := range qs {
		failed := make([]bool, len(ps))
		for j := range ps {
			out[j][i].Name = q.Name
		}
		for k := 0; k <= reps; k++ {
			for n := range ps {
				j := (n + k) % len(ps)
				if failed[j] {
					continue
				}
				r := &out[j][i]
				t0 := time.Now()
				body, err := doQuery(ctx, client, ps[j].URL(q.Path), q.Params)
				d := time.Since(t0)
				if err != nil {
					r.Error, failed[j] = err.Error(), true
					continue
				}
				r.body = body
				if k > 0 {
					r.Runs = append(r.Runs, float64(d.Microseconds())/1000)
				}
			}
		}
		for j := range ps {
			r := &out[j][i]
			if r.body != nil {
				r.Points = countPoints(r.body)
			}
			if len(r.Runs) > 0 {
				s := slices.Clone(r.Runs)
				sort.Float64s(s)
				r.MedianMs = quantile(s, 0.5)
				r.P90Ms = quantile(s, 0.9)
			}
		}
	}
	return out
}

// quantile of sorted values, interpolating between closest ranks.
func quantile(s []float64, q float64) float64 {
	if len(s) == 1 {
		return s[0]
	}
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// doQuery posts params to u as a form, as Grafana does, but for label
// values (/api/v1/label/<name>/values), which the Prometheus API serves to
// GET only.
func doQuery(ctx context.Context, client *http.Client, u string, params url.Values) ([]byte, error) {
	var req *http.Request
	var err error
	if strings.Contains(u, "/api/v1/label/") {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, u+"?"+params.Encode(), nil)
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(params.Encode()))
		if req != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		if len(b) > 300 {
			b = b[:300]
		}
		return nil, fmt.Errorf("%s: %s", resp.Status, b)
	}
	return b, nil
}

// apiResponse is the part of a Prometheus API response the comparison reads.
type apiResponse struct {
	Status string          `json:"status"`
	Data   json.RawMessage `json:"data"`
}

type queryData struct {
	ResultType string          `json:"resultType"`
	Result     json.RawMessage `json:"result"`
}

type promSeries struct {
	Metric     map[string]string    `json:"metric"`
	Values     [][2]any             `json:"values"`
	Value      [2]any               `json:"value"`
	Histograms [][2]json.RawMessage `json:"histograms"`
	Histogram  [2]json.RawMessage   `json:"histogram"`
}

// promHistogram is a native histogram sample of a query result.
type promHistogram struct {
	Count   string               `json:"count"`
	Sum     string               `json:"sum"`
	Buckets [][4]json.RawMessage `json:"buckets"` // boundary rule, lower, upper, count
}

// addHistogramPoint adds histogram sample v of series k to out as float
// points: its count, its sum and every bucket's count under keys of their own.
func addHistogramPoint(out map[string][]point, k string, v [2]json.RawMessage) error {
	var t float64
	var h promHistogram
	if err := json.Unmarshal(v[0], &t); err != nil {
		return fmt.Errorf("bad histogram timestamp %s: %w", v[0], err)
	}
	if err := json.Unmarshal(v[1], &h); err != nil {
		return fmt.Errorf("bad histogram %s: %w", v[1], err)
	}
	add := func(key, val string) error {
		f, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return fmt.Errorf("bad histogram value %q: %w", val, err)
		}
		out[key] = append(out[key], point{t, f})
		return nil
	}
	if err := add(k+" count", h.Count); err != nil {
		return err
	}
	if err := add(k+" sum", h.Sum); err != nil {
		return err
	}
	for _, b := range h.Buckets {
		var c string
		if err := json.Unmarshal(b[3], &c); err != nil {
			return fmt.Errorf("bad bucket count %s: %w", b[3], err)
		}
		if err := add(fmt.Sprintf("%s bucket %s %s %s", k, b[0], b[1], b[2]), c); err != nil {
			return err
		}
	}
	return nil
}

// point is one sample of a normalised result.
type point struct {
	t float64
	v float64
}

// normalize turns a response body into series key → points (matrix, vector,
// scalar) or a sorted list of strings (series, labels).
func normalize(body []byte) (map[string][]point, []string, error) {
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, nil, fmt.Errorf("decode response: %w", err)
	}
	if r.Status != "success" {
		return nil, nil, fmt.Errorf("status %q", r.Status)
	}
	var qd queryData
	if json.Unmarshal(r.Data, &qd) == nil && qd.ResultType != "" {
		out := map[string][]point{}
		switch qd.ResultType {
		case "matrix", "vector":
			var ss []promSeries
			if err := json.Unmarshal(qd.Result, &ss); err != nil {
				return nil, nil, fmt.Errorf("decode %s: %w", qd.ResultType, err)
			}
			for _, s := range ss {
				k := metricKey(s.Metric)
				hs := s.Histograms
				if qd.ResultType == "vector" && s.Histogram[0] != nil {
					hs = [][2]json.RawMessage{s.Histogram}
				}
				for _, h := range hs {
					if err := addHistogramPoint(out, k, h); err != nil {
						return nil, nil, err
					}
				}
				vals := s.Values
				if qd.ResultType == "vector" && s.Value[0] != nil {
					vals = [][2]any{s.Value}
				}
				for _, v := range vals {
					p, err := toPoint(v)
					if err != nil {
						return nil, nil, err
					}
					out[k] = append(out[k], p)
				}
			}
		case "scalar":
			var v [2]any
			if err := json.Unmarshal(qd.Result, &v); err != nil {
				return nil, nil, err
			}
			p, err := toPoint(v)
			if err != nil {
				return nil, nil, err
			}
			out["scalar"] = []point{p}
		default:
			return nil, nil, fmt.Errorf("result type %q", qd.ResultType)
		}
		return out, nil, nil
	}
	// /api/v1/series: a list of label sets; /api/v1/labels: a list of names.
	var sets []map[string]string
	if json.Unmarshal(r.Data, &sets) == nil {
		l := make([]string, len(sets))
		for i, s := range sets {
			l[i] = metricKey(s)
		}
		sort.Strings(l)
		return nil, l, nil
	}
	var names []string
	if err := json.Unmarshal(r.Data, &names); err != nil {
		return nil, nil, fmt.Errorf("decode data: %w", err)
	}
	sort.Strings(names)
	return nil, names, nil
}

// countPoints is the number of points of an answer, -1 for a list or an
// answer that does not decode.
func countPoints(body []byte) int {
	m, _, err := normalize(body)
	if err != nil || m == nil {
		return -1
	}
	n := 0
	for _, ps := range m {
		n += len(ps)
	}
	return n
}

func toPoint(v [2]any) (point, error) {
	t, ok := v[0].(float64)
	s, ok2 := v[1].(string)
	if !ok || !ok2 {
		return point{}, fmt.Errorf("bad sample %v", v)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return point{}, fmt.Errorf("bad value %q: %w", s, err)
	}
	return point{t, f}, nil
}

func metricKey(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	b.WriteByte('}')
	return b.String()
}

// Compare reports how two answers to the same query differ ("" if they are
// equal: same series, timestamps, and values within relative tolerance tol;
// NaN equals NaN).
func Compare(a, b []byte, tol float64) string {
	ma, la, err := normalize(a)
	if err != nil {
		return "first: " + err.Error()
	}
	mb, lb, err := normalize(b)
	if err != nil {
		return "second: " + err.Error()
	}
	if la != nil || lb != nil {
		if !slices.Equal(la, lb) {
			return fmt.Sprintf("lists differ: %d vs %d entries%s", len(la), len(lb), firstListDiff(la, lb))
		}
		return ""
	}
	if len(ma) != len(mb) {
		return fmt.Sprintf("%d vs %d series", len(ma), len(mb))
	}
	var diffs, points int
	var first string
	keys := make([]string, 0, len(ma))
	for k := range ma {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		pa, pb := ma[k], mb[k]
		if pb == nil {
			return "series " + k + " missing in second"
		}
		if len(pa) != len(pb) {
			return fmt.Sprintf("series %s: %d vs %d points", k, len(pa), len(pb))
		}
		for i := range pa {
			points++
			if pa[i].t != pb[i].t || !near(pa[i].v, pb[i].v, tol) {
				diffs++
				if first == "" {
					first = fmt.Sprintf("%s at %v: %v vs %v@%v", k, pa[i].t, pa[i].v, pb[i].v, pb[i].t)
				}
			}
		}
	}
	if diffs > 0 {
		return fmt.Sprintf("%d of %d points differ, first %s", diffs, points, first)
	}
	return ""
}

func firstListDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf(", first %s vs %s", a[i], b[i])
		}
	}
	return ""
}

func near(a, b, tol float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	if a == b {
		return true
	}
	return math.Abs(a-b) <= tol*math.Max(math.Abs(a), math.Abs(b))
}

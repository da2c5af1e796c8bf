package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/tandem-tsdb/tandem/tsdb/head"
	"github.com/tandem-tsdb/tandem/workload"
)

const (
	ctV1 = "application/x-protobuf"
	ctV2 = "application/x-protobuf;proto=io.prometheus.write.v2.Request"
)

// recordingAppender keeps every batch it receives. reject decides per sample whether it is refused;
type recordingAppender struct {
	mu      sync.Mutex
	batches []head.Batch
	err     error
	reject  func(ls labels.Labels, s head.Sample) error
}

// exemplars returns how many exemplars were written.
func (a *recordingAppender) exemplars() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, b := range a.batches {
		for _, s := range b.Series {
			n += len(s.Exemplars)
		}
	}
	return n
}

func (a *recordingAppender) AppendBatch(_ context.Context, b *head.Batch) (head.AppendResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return head.AppendResult{}, a.err
	}
	var res head.AppendResult
	kept := head.Batch{Metadata: append([]head.Metadata(nil), b.Metadata...)}
	for _, s := range b.Series {
		var ss []head.Sample
		for _, smp := range s.Samples {
			if a.reject != nil {
				if err := a.reject(s.Labels, smp); err != nil {
					res.Reject(err, 1, s.Labels.String())
					continue
				}
			}
			ss = append(ss, smp)
		}
		hs := s.Histograms // handed over: kept as they are
		res.SamplesWritten += len(ss)
		res.HistogramsWritten += len(hs)
		res.ExemplarsWritten += len(s.Exemplars)
		if len(ss) > 0 || len(s.Exemplars) > 0 || len(hs) > 0 {
			// The labels are copied, as the Appender contract asks: a new
			// series' labels point into the decoder's arena.
			kept.Series = append(kept.Series, head.BatchSeries{Labels: s.Labels.Copy(), Samples: ss,
				Exemplars: slices.Clone(s.Exemplars), Histograms: slices.Clone(hs)})
		}
	}
	a.batches = append(a.batches, kept)
	return res, nil
}

// series returns every written series (label string → samples).
func (a *recordingAppender) series() map[string][]head.Sample {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string][]head.Sample{}
	for _, b := range a.batches {
		for _, s := range b.Series {
			out[s.Labels.String()] = append(out[s.Labels.String()], s.Samples...)
		}
	}
	return out
}

// histograms returns every written histogram sample (label string → samples).
func (a *recordingAppender) histograms() map[string][]head.HistogramSample {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string][]head.HistogramSample{}
	for _, b := range a.batches {
		for _, s := range b.Series {
			if len(s.Histograms) > 0 {
				out[s.Labels.String()] = append(out[s.Labels.String()], s.Histograms...)
			}
		}
	}
	return out
}

// metadata returns every written metadata entry by metric name.
func (a *recordingAppender) metadata() map[string]head.Metadata {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]head.Metadata{}
	for _, b := range a.batches {
		for _, m := range b.Metadata {
			out[m.Metric] = m
		}
	}
	return out
}

func (a *recordingAppender) samples() int {
	n := 0
	for _, ss := range a.series() {
		n += len(ss)
	}
	return n
}

// testServer runs a write handler on 127.0.0.1.
func testServer(t testing.TB, app Appender, lim Limits, reg prometheus.Registerer) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(NewWriteHandler(app, WriteHandlerOptions{Limits: lim, Registerer: reg}))
	t.Cleanup(srv.Close)
	return srv
}

type result struct {
	status int
	header http.Header
	body   string
}

// post sends body (already compressed) with the given headers; an empty encoding omits Content-Encoding.
func post(t testing.TB, url, contentType, encoding string, body []byte) result {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/api/v1/write", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func postV1(t testing.TB, url string, req *prompb.WriteRequest) result {
	t.Helper()
	return post(t, url, ctV1, "snappy", snappy.Encode(nil, marshal(t, req)))
}

func postV2(t testing.TB, url string, req *writev2.Request) result {
	t.Helper()
	return post(t, url, ctV2, "snappy", snappy.Encode(nil, marshal(t, req)))
}

func marshal(t testing.TB, m interface{ Marshal() ([]byte, error) }) []byte {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// expectStatus fails the test unless r has the wanted status.
func expectStatus(t testing.TB, r result, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("status = %d, want %d; body: %q", r.status, want, r.body)
	}
}

// expectWritten checks the three 2.0 written headers.
func expectWritten(t testing.TB, r result, samples, histograms, exemplars string) {
	t.Helper()
	for h, want := range map[string]string{HeaderSamplesWritten: samples, HeaderHistogramsWritten: histograms, HeaderExemplarsWritten: exemplars} {
		if got := r.header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
}

// expectNoWritten checks that a 1.0 (or un-negotiated) response carries no written headers.
func expectNoWritten(t testing.TB, r result) {
	t.Helper()
	for _, h := range []string{HeaderSamplesWritten, HeaderHistogramsWritten, HeaderExemplarsWritten} {
		if v, ok := r.header[h]; ok {
			t.Errorf("unexpected header %s: %v", h, v)
		}
	}
}

// v1Series builds a 1.0 series from name/value pairs (kept in the given order) and samples.
func v1Series(pairs []string, samples ...prompb.Sample) prompb.TimeSeries {
	ts := prompb.TimeSeries{Samples: samples}
	for i := 0; i < len(pairs); i += 2 {
		ts.Labels = append(ts.Labels, prompb.Label{Name: pairs[i], Value: pairs[i+1]})
	}
	return ts
}

// v2Builder builds 2.0 requests keeping label pairs in the given order.
type v2Builder struct {
	st  writev2.SymbolsTable
	req writev2.Request
}

func newV2Builder() *v2Builder { return &v2Builder{st: writev2.NewSymbolTable()} }

func (b *v2Builder) refs(pairs []string) []uint32 {
	var refs []uint32
	for _, s := range pairs {
		refs = append(refs, b.st.Symbolize(s))
	}
	return refs
}

func (b *v2Builder) add(pairs []string, samples ...writev2.Sample) *writev2.TimeSeries {
	b.req.Timeseries = append(b.req.Timeseries, writev2.TimeSeries{LabelsRefs: b.refs(pairs), Samples: samples})
	return &b.req.Timeseries[len(b.req.Timeseries)-1]
}

func (b *v2Builder) meta(ts *writev2.TimeSeries, typ writev2.Metadata_MetricType, help, unit string) {
	ts.Metadata = writev2.Metadata{Type: typ, HelpRef: b.st.Symbolize(help), UnitRef: b.st.Symbolize(unit)}
}

func (b *v2Builder) build() *writev2.Request {
	r := b.req
	r.Symbols = append([]string(nil), b.st.Symbols()...)
	return &r
}

// nodeSeries is one series parsed from the node_exporter fixtures.
type nodeSeries struct {
	labels labels.Labels
	value  float64
	typ    model.MetricType
	help   string
}

var (
	nodeOnce sync.Once
	nodeData []nodeSeries
	nodeErr  error
)

// loadNodeSeries parses the first node_exporter scrape and fakes instances until n series exist.
func loadNodeSeries(t testing.TB, n int) []nodeSeries {
	t.Helper()
	nodeOnce.Do(func() {
		dir, err := workload.FindDataDir()
		if err != nil {
			nodeErr = err
			return
		}
		files, err := filepath.Glob(filepath.Join(dir, "*.prom"))
		if err != nil || len(files) == 0 {
			nodeErr = errors.New("no node_exporter fixtures")
			return
		}
		sort.Strings(files)
		data, err := os.ReadFile(files[0])
		if err != nil {
			nodeErr = err
			return
		}
		p := textparse.NewPromParser(data, labels.NewSymbolTable(), false)
		types := map[string]model.MetricType{}
		helps := map[string]string{}
		for {
			e, err := p.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				nodeErr = err
				return
			}
			switch e {
			case textparse.EntryType:
				name, typ := p.Type()
				types[string(name)] = typ
			case textparse.EntryHelp:
				name, help := p.Help()
				helps[string(name)] = string(help)
			case textparse.EntrySeries:
				var ls labels.Labels
				p.Labels(&ls)
				_, _, v := p.Series()
				fam := ls.Get(model.MetricNameLabel)
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if _, ok := types[fam]; !ok {
						fam = strings.TrimSuffix(fam, suf)
					}
				}
				nodeData = append(nodeData, nodeSeries{labels: ls, value: v, typ: types[fam], help: helps[fam]})
			}
		}
	})
	if nodeErr != nil {
		t.Fatalf("loading node_exporter fixtures: %v", nodeErr)
	}
	out := make([]nodeSeries, 0, n)
	for inst := 0; len(out) < n; inst++ {
		for _, s := range nodeData {
			if len(out) == n {
				break
			}
			b := labels.NewBuilder(s.labels)
			b.Set("instance", "node-"+string(rune('a'+inst%26))+".example.org:9100")
			b.Set("job", "node")
			s.labels = b.Labels()
			out = append(out, s)
		}
	}
	return out
}

// nodeRequestV1 builds a 1.0 request of n node_exporter series with one sample each.
func nodeRequestV1(t testing.TB, n int, ts int64) *prompb.WriteRequest {
	req := &prompb.WriteRequest{}
	for _, s := range loadNodeSeries(t, n) {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
			Labels:  prompb.FromLabels(s.labels, nil),
			Samples: []prompb.Sample{{Timestamp: ts, Value: s.value}},
		})
	}
	return req
}

// nodeRequestV2 builds a 2.0 request of n node_exporter series with one sample each and metadata.
func nodeRequestV2(t testing.TB, n int, ts int64) *writev2.Request {
	st := writev2.NewSymbolTable()
	req := &writev2.Request{}
	for _, s := range loadNodeSeries(t, n) {
		req.Timeseries = append(req.Timeseries, writev2.TimeSeries{
			LabelsRefs: st.SymbolizeLabels(s.labels, nil),
			Samples:    []writev2.Sample{{Timestamp: ts, Value: s.value}},
			Metadata: writev2.Metadata{
				Type:    writev2.FromMetadataType(s.typ),
				HelpRef: st.Symbolize(s.help),
			},
		})
	}
	req.Symbols = st.Symbols()
	return req
}

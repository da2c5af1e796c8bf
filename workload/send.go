package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/snappy"
	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// SendOptions configures how scrapes are turned into requests and sent.
type SendOptions struct {
	Version           int                     // remote-write protocol: 1 or 2
	Shards            int                     // concurrent shards; default 4
	MaxSamplesPerSend int                     // samples per request; default 2000
	BatchDeadline     time.Duration           // flush a shard's batch once its oldest sample is this much older than the next; default 5s
	Backoff           remoteapi.BackoffConfig // retry backoff on 5xx and network errors; default 50ms..2s, 10 retries
	Client            *http.Client            // default http.DefaultClient
	Tenant            string                  // sent as X-Scope-OrgID when set
	// Lockstep sends round by round (see Request.Round): every shard finishes
	// a round before any starts the next, as when Prometheus sends in real
	// time. Without it shards run free, as when Prometheus replays a backlog.
	Lockstep bool
}

func (o *SendOptions) setDefaults() error {
	if o.Version != 1 && o.Version != 2 {
		return fmt.Errorf("remote-write version must be 1 or 2, got %d", o.Version)
	}
	if o.Shards <= 0 {
		o.Shards = 4
	}
	if o.MaxSamplesPerSend <= 0 {
		o.MaxSamplesPerSend = 2000
	}
	if o.BatchDeadline <= 0 {
		o.BatchDeadline = 5 * time.Second
	}
	if o.Backoff.Min <= 0 {
		o.Backoff = remoteapi.BackoffConfig{Min: 50 * time.Millisecond, Max: 2 * time.Second, MaxRetries: 10}
	}
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	if _, ok := o.Client.Transport.(tenantTransport); o.Tenant != "" && !ok {
		c := *o.Client
		c.Transport = tenantTransport{tenant: o.Tenant, next: c.Transport}
		o.Client = &c
	}
	return nil
}

// Request is one remote-write request of one shard, not yet encoded: exactly
// one of V1 and V2 is set.
type Request struct {
	Shard   int
	Round   int // batch-deadline window of the request's oldest sample, counted from the first scrape
	Samples int
	V1      *prompb.WriteRequest
	V2      *writev2.Request
}

// MessageType is the remote-write message type of r.
func (r Request) MessageType() remoteapi.WriteMessageType {
	if r.V2 != nil {
		return remoteapi.WriteV2MessageType
	}
	return remoteapi.WriteV1MessageType
}

// Message is the protobuf message of r, as the remote API client takes it.
func (r Request) Message() any {
	if r.V2 != nil {
		return r.V2
	}
	return r.V1
}

// BuildRequests shards the samples of scrapes (in their order) by series Ref
// modulo Shards and batches each shard like Prometheus' queue manager: one
// TimeSeries per sample, at most MaxSamplesPerSend samples per request, and a
// flush when the batch's oldest sample is BatchDeadline older than the next.
// Version 2 requests carry a symbols table and per-series metadata; version 1
// requests carry the metric metadata in each shard's first request.
func BuildRequests(scrapes []Scrape, opts SendOptions) ([][]Request, error) {
	out := make([][]Request, max(opts.Shards, 1))
	b, err := NewBatcher(opts, func(r Request) error {
		if r.Shard >= len(out) {
			out = append(out, make([][]Request, r.Shard+1-len(out))...)
		}
		out[r.Shard] = append(out[r.Shard], r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := b.Add(scrapes); err != nil {
		return nil, err
	}
	if err := b.Flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// Batcher is BuildRequests for a stream of scrapes: Add scrapes in order,
// then Flush; every finished request is passed to the emit function.
type Batcher struct {
	opts     SendOptions
	emit     func(Request) error
	pending  [][]*Sample
	pendingT [][]int64
	metaSent []bool
	deadline int64
	t0       int64
	started  bool
}

// NewBatcher returns a Batcher that passes each request to emit.
func NewBatcher(opts SendOptions, emit func(Request) error) (*Batcher, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	return &Batcher{
		opts: opts, emit: emit,
		pending: make([][]*Sample, opts.Shards), pendingT: make([][]int64, opts.Shards),
		metaSent: make([]bool, opts.Shards), deadline: opts.BatchDeadline.Milliseconds(),
	}, nil
}

func (b *Batcher) flush(sh int) error {
	if len(b.pending[sh]) == 0 {
		return nil
	}
	var r Request
	if b.opts.Version == 2 {
		r = buildV2(b.pending[sh], b.pendingT[sh])
	} else {
		r = buildV1(b.pending[sh], b.pendingT[sh], !b.metaSent[sh])
		b.metaSent[sh] = true
	}
	r.Shard = sh
	r.Round = int((b.pendingT[sh][0] - b.t0) / b.deadline)
	b.pending[sh], b.pendingT[sh] = nil, nil
	return b.emit(r)
}

// Add batches the samples of scrapes, which follow the previous ones in time.
func (b *Batcher) Add(scrapes []Scrape) error {
	if !b.started && len(scrapes) > 0 {
		b.t0, b.started = scrapes[0].T, true
	}
	for i := range scrapes {
		sc := &scrapes[i]
		for sh := range b.pending {
			if len(b.pendingT[sh]) > 0 && sc.T-b.pendingT[sh][0] >= b.deadline {
				if err := b.flush(sh); err != nil {
					return err
				}
			}
		}
		for j := range sc.Samples {
			s := &sc.Samples[j]
			sh := int(s.Ref % uint64(b.opts.Shards))
			b.pending[sh] = append(b.pending[sh], s)
			b.pendingT[sh] = append(b.pendingT[sh], sc.T)
			if len(b.pending[sh]) >= b.opts.MaxSamplesPerSend {
				if err := b.flush(sh); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Flush emits every shard's pending batch.
func (b *Batcher) Flush() error {
	for sh := range b.pending {
		if err := b.flush(sh); err != nil {
			return err
		}
	}
	return nil
}

func buildV1(samples []*Sample, ts []int64, withMeta bool) Request {
	req := &prompb.WriteRequest{Timeseries: make([]prompb.TimeSeries, len(samples))}
	seen := map[string]bool{}
	for i, s := range samples {
		lbls := make([]prompb.Label, 0, s.Labels.Len())
		s.Labels.Range(func(l labels.Label) { lbls = append(lbls, prompb.Label{Name: l.Name, Value: l.Value}) })
		req.Timeseries[i] = prompb.TimeSeries{Labels: lbls}
		if s.H != nil {
			req.Timeseries[i].Histograms = []prompb.Histogram{prompb.FromIntHistogram(ts[i], s.H)}
		} else {
			req.Timeseries[i].Samples = []prompb.Sample{{Value: s.V, Timestamp: ts[i]}}
		}
		if withMeta && s.Meta != nil {
			fam := familyOf(s)
			if !seen[fam] {
				seen[fam] = true
				req.Metadata = append(req.Metadata, prompb.MetricMetadata{
					Type: prompb.FromMetadataType(s.Meta.Type), MetricFamilyName: fam, Help: s.Meta.Help, Unit: s.Meta.Unit,
				})
			}
		}
	}
	return Request{Samples: len(samples), V1: req}
}

func buildV2(samples []*Sample, ts []int64) Request {
	st := writev2.NewSymbolTable()
	req := &writev2.Request{Timeseries: make([]writev2.TimeSeries, len(samples))}
	for i, s := range samples {
		series := writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(s.Labels, nil)}
		if s.H != nil {
			series.Histograms = []writev2.Histogram{writev2.FromIntHistogram(0, ts[i], s.H)}
		} else {
			series.Samples = []writev2.Sample{{Value: s.V, Timestamp: ts[i]}}
		}
		if s.Meta != nil {
			series.Metadata = writev2.Metadata{
				Type:    writev2.FromMetadataType(s.Meta.Type),
				HelpRef: st.Symbolize(s.Meta.Help),
				UnitRef: st.Symbolize(s.Meta.Unit),
			}
		}
		req.Timeseries[i] = series
	}
	req.Symbols = st.Symbols()
	return Request{Samples: len(samples), V2: req}
}

// familyOf is the metric family name of a sample (its name without the
// histogram/summary suffix when its metadata says so).
func familyOf(s *Sample) string {
	name := s.Labels.Get("__name__")
	switch s.Meta.Type {
	case "histogram", "summary":
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if len(name) > len(suf) && name[len(name)-len(suf):] == suf {
				return name[:len(name)-len(suf)]
			}
		}
	}
	return name
}

// Encoded is a request encoded for the wire: a snappy-compressed body and the
// headers Prometheus sends with it.
type Encoded struct {
	Body        []byte
	ContentType string
	Version     string // X-Prometheus-Remote-Write-Version
	Samples     int
}

// Encode marshals and snappy-compresses r, e.g. to replay it in benchmarks.
func (r Request) Encode() (Encoded, error) {
	var (
		raw []byte
		err error
		e   = Encoded{Samples: r.Samples}
	)
	if r.V2 != nil {
		raw, err = r.V2.Marshal()
		e.ContentType, e.Version = "application/x-protobuf;proto=io.prometheus.write.v2.Request", "2.0.0"
	} else {
		raw, err = r.V1.Marshal()
		e.ContentType, e.Version = "application/x-protobuf", "0.1.0"
	}
	if err != nil {
		return Encoded{}, fmt.Errorf("marshal request: %w", err)
	}
	e.Body = snappy.Encode(nil, raw)
	return e, nil
}

// NewHTTPRequest returns a POST of e to writeURL with the remote-write headers.
func (e Encoded) NewHTTPRequest(ctx context.Context, writeURL string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, writeURL, bytes.NewReader(e.Body))
	if err != nil {
		return nil, fmt.Errorf("new request: %w", err)
	}
	req.Header.Set("Content-Type", e.ContentType)
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("X-Prometheus-Remote-Write-Version", e.Version)
	req.Header.Set("User-Agent", "tandem-workload")
	return req, nil
}

// EncodeAll encodes every request of every shard.
func EncodeAll(reqs [][]Request) ([][]Encoded, error) {
	out := make([][]Encoded, len(reqs))
	for sh, rs := range reqs {
		for _, r := range rs {
			e, err := r.Encode()
			if err != nil {
				return nil, err
			}
			out[sh] = append(out[sh], e)
		}
	}
	return out, nil
}

// SendStats summarises a send.
type SendStats struct {
	Requests int64 // requests acknowledged
	Samples  int64 // samples in acknowledged requests
	Retries  int64 // retried attempts
}

// NewClient returns the remote-write API client for writeURL (the full URL of
// the write endpoint, e.g. http://127.0.0.1:9201/api/v1/write).
func NewClient(writeURL string, opts SendOptions) (*remoteapi.API, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	u, err := url.Parse(writeURL)
	if err != nil {
		return nil, fmt.Errorf("parse write URL: %w", err)
	}
	p := u.Path
	u.Path, u.RawPath = "", ""
	api, err := remoteapi.NewAPI(u.String(), remoteapi.WithAPIPath(p), remoteapi.WithAPIHTTPClient(opts.Client), remoteapi.WithAPIBackoff(opts.Backoff))
	if err != nil {
		return nil, fmt.Errorf("new remote-write client: %w", err)
	}
	return api, nil
}

// SendRequests sends each shard's requests in order, shards concurrently,
// with the remote-write client (which retries 5xx with backoff). It stops at
// the first request that fails for good and returns that error.
func SendRequests(ctx context.Context, writeURL string, reqs [][]Request, opts SendOptions) (SendStats, error) {
	var st SendStats
	api, err := NewClient(writeURL, opts)
	if err != nil {
		return st, err
	}
	if !opts.Lockstep {
		err := sendShards(ctx, api, reqs, &st)
		return st, err
	}
	// Split every shard's requests into rounds and send round by round.
	next := make([]int, len(reqs))
	for {
		round, more := -1, false
		for sh, rs := range reqs {
			if next[sh] < len(rs) && (round < 0 || rs[next[sh]].Round < round) {
				round, more = rs[next[sh]].Round, true
			}
		}
		if !more {
			return st, nil
		}
		part := make([][]Request, len(reqs))
		for sh, rs := range reqs {
			for next[sh] < len(rs) && rs[next[sh]].Round == round {
				part[sh] = append(part[sh], rs[next[sh]])
				next[sh]++
			}
		}
		if err := sendShards(ctx, api, part, &st); err != nil {
			return st, err
		}
	}
}

// sendShards sends each shard's requests in order, shards concurrently.
func sendShards(ctx context.Context, api *remoteapi.API, reqs [][]Request, st *SendStats) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for sh := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, r := range reqs[sh] {
				_, err := api.Write(ctx, r.MessageType(), r.Message(), remoteapi.WithWriteRetryCallback(func(error) { atomic.AddInt64(&st.Retries, 1) }))
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("shard %d request %d: %w", sh, i, err))
					mu.Unlock()
					cancel()
					return
				}
				atomic.AddInt64(&st.Requests, 1)
				atomic.AddInt64(&st.Samples, int64(r.Samples))
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Send batches scrapes into requests of the given remote-write version
// (1 or 2) over shards and sends them to writeURL like Prometheus does; see
// BuildRequests and SendRequests.
// Shards run in lockstep, as a Prometheus sending in real time.
func Send(ctx context.Context, writeURL string, version int, scrapes []Scrape, shards, maxSamplesPerSend int) (SendStats, error) {
	opts := SendOptions{Version: version, Shards: shards, MaxSamplesPerSend: maxSamplesPerSend, Lockstep: true}
	reqs, err := BuildRequests(scrapes, opts)
	if err != nil {
		return SendStats{}, err
	}
	return SendRequests(ctx, writeURL, reqs, opts)
}

// tenantTransport names a tenant in every request it sends.
type tenantTransport struct {
	tenant string
	next   http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t tenantTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Scope-OrgID", t.tenant)
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}

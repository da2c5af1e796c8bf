package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// blockingAppender holds every AppendBatch until release is closed,
// signalling entered for each one.
type blockingAppender struct {
	recordingAppender
	entered chan struct{}
	release chan struct{}
}

func newBlockingAppender() *blockingAppender {
	return &blockingAppender{entered: make(chan struct{}, 100), release: make(chan struct{})}
}

func (a *blockingAppender) AppendBatch(ctx context.Context, b *head.Batch) (head.AppendResult, error) {
	a.entered <- struct{}{}
	select {
	case <-a.release:
	case <-time.After(20 * time.Second):
		return head.AppendResult{}, errors.New("test appender never released")
	}
	return a.recordingAppender.AppendBatch(ctx, b)
}

// postAsync posts body in the background; the result arrives on the channel.
func postAsync(t *testing.T, url, ct string, body []byte) <-chan result {
	ch := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- result{status: -1, body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		ch <- result{status: resp.StatusCode, header: resp.Header, body: string(b)}
	}()
	return ch
}

func waitEntered(t *testing.T, a *blockingAppender, n int) {
	t.Helper()
	for range n {
		select {
		case <-a.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("requests did not reach the appender")
		}
	}
}

// TestWriteConcurrencyLimit: with MaxConcurrentRequests requests in flight
// the next gets 503 with Retry-After (Prometheus retries it, and does not
// reshard meanwhile), never 429 (which Prometheus drops).
func TestWriteConcurrencyLimit(t *testing.T) {
	const n = 3
	app := newBlockingAppender()
	reg := prometheus.NewRegistry()
	srv := testServer(t, app, Limits{MaxConcurrentRequests: n, MaxQueueWait: 50 * time.Millisecond}, reg)
	body := func(i int) []byte { return snappy.Encode(nil, marshal(t, nodeRequestV2(t, 5, int64(1000+i)))) }
	var pending []<-chan result
	for i := range n {
		pending = append(pending, postAsync(t, srv.URL, ctV2, body(i)))
	}
	waitEntered(t, app, n)
	if v := metricValue(t, reg, "tandem_remote_write_requests_in_flight"); v != n {
		t.Errorf("requests in flight = %v, want %d", v, n)
	}

	r := post(t, srv.URL, ctV2, "snappy", body(n))
	expectStatus(t, r, http.StatusServiceUnavailable)
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}
	expectWritten(t, r, "0", "0", "0")
	if !strings.Contains(r.body, "too many concurrent write requests") {
		t.Errorf("body %q", r.body)
	}

	close(app.release)
	for _, ch := range pending {
		if r := <-ch; r.status != http.StatusNoContent {
			t.Errorf("held request: status %d %q", r.status, r.body)
		}
	}
	expectStatus(t, post(t, srv.URL, ctV2, "snappy", body(n)), http.StatusNoContent) // the slots are free again
}

// TestWriteQueueWait: a request finding every slot taken waits for one up
// to MaxQueueWait instead of being refused at once (many Prometheus
// servers sharing a tandem would otherwise see 503s at every burst).
func TestWriteQueueWait(t *testing.T) {
	app := newBlockingAppender()
	srv := testServer(t, app, Limits{MaxConcurrentRequests: 1, MaxQueueWait: 20 * time.Second}, nil)
	body := func(i int) []byte { return snappy.Encode(nil, marshal(t, nodeRequestV1(t, 5, int64(1000+i)))) }
	first := postAsync(t, srv.URL, ctV1, body(0))
	waitEntered(t, app, 1)
	second := postAsync(t, srv.URL, ctV1, body(1))
	select {
	case r := <-second:
		t.Fatalf("a request refused without waiting for a slot: %d %q", r.status, r.body)
	case <-time.After(300 * time.Millisecond):
	}
	close(app.release)
	for i, ch := range []<-chan result{first, second} {
		if r := <-ch; r.status != http.StatusNoContent {
			t.Errorf("request %d: status %d %q", i, r.status, r.body)
		}
	}
}

// TestWriteInflightBytesLimit: the decoded bytes of the requests in flight
// are bounded; a request alone always fits.
func TestWriteInflightBytesLimit(t *testing.T) {
	app := newBlockingAppender()
	raw := marshal(t, nodeRequestV1(t, 20, 1))
	srv := testServer(t, app, Limits{MaxInflightBytes: int64(len(raw)) + 10}, nil)
	first := postAsync(t, srv.URL, ctV1, snappy.Encode(nil, raw))
	waitEntered(t, app, 1)
	r := post(t, srv.URL, ctV1, "snappy", snappy.Encode(nil, marshal(t, nodeRequestV1(t, 1, 2))))
	expectStatus(t, r, http.StatusServiceUnavailable)
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}
	close(app.release)
	if r := <-first; r.status != http.StatusNoContent {
		t.Errorf("first request: status %d %q", r.status, r.body)
	}
	big := marshal(t, nodeRequestV1(t, 100, 3)) // larger than the budget, alone
	expectStatus(t, post(t, srv.URL, ctV1, "snappy", snappy.Encode(nil, big)), http.StatusNoContent)
}

// metricValue returns the value of the unlabelled gauge or counter name in reg.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			return m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// testServerHandler runs h on 127.0.0.1.
func testServerHandler(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// panickingAppender panics in AppendBatch (or, as a SeriesResolver, while
// the request is decoded) while armed.
type panickingAppender struct {
	recordingAppender
	inAppend, inDecode atomic.Bool
}

func (a *panickingAppender) AppendBatch(ctx context.Context, b *head.Batch) (head.AppendResult, error) {
	if a.inAppend.Load() {
		panic("appender bug")
	}
	return a.recordingAppender.AppendBatch(ctx, b)
}

func (a *panickingAppender) ResolveNext(head.SeriesRef, func(labels.Labels) bool) (head.SeriesRef, bool) {
	if a.inDecode.Load() {
		panic("resolver bug")
	}
	return head.SeriesRef{}, false
}

func (a *panickingAppender) ResolveHash(head.SeriesRef, uint64, func(labels.Labels) bool) (head.SeriesRef, bool) {
	return head.SeriesRef{}, false
}

// syncBuffer is a log sink safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWritePanic: a panic while one request is decoded or stored costs that
// request only: it is answered 500 (Prometheus retries it), logged with the
// stack and counted; its request slot is given back and the server serves
// the next request.
func TestWritePanic(t *testing.T) {
	app := &panickingAppender{}
	reg := prometheus.NewRegistry()
	var logs syncBuffer
	h := NewWriteHandler(app, WriteHandlerOptions{
		Limits:     Limits{MaxConcurrentRequests: 1},
		Logger:     slog.New(slog.NewTextHandler(&logs, nil)),
		Registerer: reg,
	})
	h.(*writeHandler).panicLog.every = 0 // log every panic
	srv := testServerHandler(t, h)
	for i, where := range []*atomic.Bool{&app.inAppend, &app.inDecode} {
		where.Store(true)
		for _, ct := range []string{ctV1, ctV2} {
			var r result
			if ct == ctV1 {
				r = postV1(t, srv.URL, nodeRequestV1(t, 5, int64(10*i+1)))
			} else {
				r = postV2(t, srv.URL, nodeRequestV2(t, 5, int64(10*i+2)))
				expectWritten(t, r, "0", "0", "0")
			}
			expectStatus(t, r, http.StatusInternalServerError)
			if !strings.Contains(r.body, "panic") {
				t.Errorf("body %q", r.body)
			}
		}
		where.Store(false)
		expectStatus(t, postV2(t, srv.URL, nodeRequestV2(t, 5, int64(10*i+3))), http.StatusNoContent)
	}
	if n := app.samples(); n != 10 {
		t.Errorf("%d samples written, want 10", n)
	}
	if v := metricValue(t, reg, "tandem_remote_write_panics_total"); v != 4 {
		t.Errorf("panics_total = %v, want 4", v)
	}
	out := logs.String()
	for _, want := range []string{"panic while handling a remote-write request", "appender bug", "resolver bug", "(*panickingAppender).AppendBatch"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// TestWriteStorageUnavailable: an error wrapping head.ErrUnavailable (the
// WAL cannot be written; nothing was acknowledged) is answered 503 with
// Retry-After; other storage errors stay 500.
func TestWriteStorageUnavailable(t *testing.T) {
	app := &recordingAppender{err: fmt.Errorf("append: %w: %w", head.ErrUnavailable, errors.New("no space left on device"))}
	srv := testServer(t, app, Limits{}, nil)
	r := postV2(t, srv.URL, nodeRequestV2(t, 5, 1))
	expectStatus(t, r, http.StatusServiceUnavailable)
	if got := r.header.Get("Retry-After"); got != "5" {
		t.Errorf("Retry-After = %q, want 5", got)
	}
	expectWritten(t, r, "0", "0", "0")
	if !strings.Contains(r.body, "no space left on device") {
		t.Errorf("body %q", r.body)
	}
	expectStatus(t, postV1(t, srv.URL, nodeRequestV1(t, 5, 1)), http.StatusServiceUnavailable)

	app.err = errors.New("head closing")
	r = postV1(t, srv.URL, nodeRequestV1(t, 5, 1))
	expectStatus(t, r, http.StatusInternalServerError)
	if got := r.header.Get("Retry-After"); got != "" {
		t.Errorf("500 with Retry-After %q", got)
	}
}

package remote

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tandem-tsdb/tandem/tenant"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// Header names and values of the remote-write protocol.
const (
	// HeaderVersion carries the protocol version (request) or the highest one supported (response).
	HeaderVersion = "X-Prometheus-Remote-Write-Version"
	// HeaderSamplesWritten is the 2.0 response header counting written float samples.
	HeaderSamplesWritten = "X-Prometheus-Remote-Write-Samples-Written"
	// HeaderHistogramsWritten is the 2.0 response header counting written histogram samples.
	HeaderHistogramsWritten = "X-Prometheus-Remote-Write-Histograms-Written"
	// HeaderExemplarsWritten is the 2.0 response header counting written exemplars.
	HeaderExemplarsWritten = "X-Prometheus-Remote-Write-Exemplars-Written"

	// SupportedVersion is the highest remote-write version tandem receives, returned in HeaderVersion.
	SupportedVersion = "2.0.0"

	// ProtoV1 is the Content-Type "proto" parameter of the 1.0 message (also the default).
	ProtoV1 = "prometheus.WriteRequest"
	// ProtoV2 is the Content-Type "proto" parameter of the 2.0 message.
	ProtoV2 = "io.prometheus.write.v2.Request"

	contentTypeProtobuf = "application/x-protobuf"
	encodingSnappy      = "snappy"
)

// errExemplarsRefused is reported for exemplars the storage did not keep.
var errExemplarsRefused = errors.New("exemplars out of order for their series, over the exemplar limit, or of an invalid series")

// protoVersion is the negotiated protobuf message of a request.
type protoVersion int

const (
	protoUnknown protoVersion = iota
	protoV1
	protoV2
)

func (v protoVersion) label() string {
	switch v {
	case protoV1:
		return versionLabelV1
	case protoV2:
		return versionLabelV2
	}
	return versionLabelUnknown
}

// parseContentType picks the protobuf message from a request Content-Type (RFC 9110 syntax).
func parseContentType(ct string) (protoVersion, error) {
	if strings.TrimSpace(ct) == "" {
		return protoV1, nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return protoUnknown, fmt.Errorf("parsing Content-Type %q: %w", ct, err)
	}
	if mt != contentTypeProtobuf {
		return protoUnknown, fmt.Errorf("unsupported media type %q: only %s is accepted", mt, contentTypeProtobuf)
	}
	p, ok := params["proto"]
	switch {
	case !ok || p == ProtoV1:
		return protoV1, nil
	case p == ProtoV2:
		return protoV2, nil
	}
	return protoUnknown, fmt.Errorf("unsupported protobuf message %q: accepted are %s and %s", p, ProtoV1, ProtoV2)
}

// checkEncoding accepts a snappy Content-Encoding; like Prometheus, a missing one counts as snappy.
func checkEncoding(values []string) error {
	var codings []string
	for _, v := range values {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" {
				codings = append(codings, c)
			}
		}
	}
	if len(codings) == 0 || len(codings) == 1 && strings.EqualFold(codings[0], encodingSnappy) {
		return nil
	}
	return fmt.Errorf("unsupported Content-Encoding %q: only %s is accepted", strings.Join(values, ", "), encodingSnappy)
}

// Retry-After of 503 answers, in seconds: Prometheus waits that long (and
// does not reshard meanwhile) instead of backing off from 30 ms.
const (
	retryAfterBusy        = 1 // all request slots or the in-flight byte budget are taken
	retryAfterUnavailable = 5 // the storage cannot make writes durable (full disk, I/O error)
)

// response is the outcome of one request before it is written out.
type response struct {
	version    protoVersion
	status     int
	body       string
	retryAfter int // seconds, for the Retry-After header of a 503
	samples    int // float samples written
	histograms int // histogram samples written
	exemplars  int // exemplars written
}

type writeHandler struct {
	tenants Tenants
	limits  Limits
	// rateLimitedStatus answers writes over a tenant's ingestion rate (429 or 503).
	rateLimitedStatus int
	logger            *slog.Logger
	metrics           *writeMetrics
	pool              sync.Pool
	slots             chan struct{} // one element per request being handled (MaxConcurrentRequests)
	inflight          byteBudget    // decoded bytes of the requests being handled (MaxInflightBytes)

	refusedLog  logLimiter // 4xx answers
	internalLog logLimiter // 5xx answers
	panicLog    logLimiter // panics
}

// NewWriteHandler returns an http.Handler that receives Prometheus remote-write 1.0 and 2.0
// requests on any path and writes them to app.
func NewWriteHandler(app Appender, opts WriteHandlerOptions) http.Handler {
	return newWriteHandler(oneTenant{app}, opts)
}

func newWriteHandler(ts Tenants, opts WriteHandlerOptions) *writeHandler {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	lim := opts.Limits.withDefaults()
	h := &writeHandler{
		tenants:           ts,
		limits:            lim,
		rateLimitedStatus: opts.RateLimitedStatus,
		logger:            logger,
		metrics:           newWriteMetrics(opts.Registerer),
		slots:             make(chan struct{}, lim.MaxConcurrentRequests),
		inflight:          byteBudget{max: lim.MaxInflightBytes},
		refusedLog:        logLimiter{every: 5 * time.Second},
		internalLog:       logLimiter{every: time.Second},
		panicLog:          logLimiter{every: time.Second},
	}
	if h.rateLimitedStatus == 0 {
		h.rateLimitedStatus = http.StatusTooManyRequests
	}
	h.pool.New = func() any { return newDecoder(h.limits) }
	return h
}

// ServeHTTP implements http.Handler.
func (h *writeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	resp := h.serve(r)

	hdr := w.Header()
	hdr.Set(HeaderVersion, SupportedVersion)
	if resp.retryAfter > 0 {
		hdr.Set("Retry-After", strconv.Itoa(resp.retryAfter))
	}
	if resp.version == protoV2 {
		hdr.Set(HeaderSamplesWritten, strconv.Itoa(resp.samples))
		hdr.Set(HeaderHistogramsWritten, strconv.Itoa(resp.histograms))
		hdr.Set(HeaderExemplarsWritten, strconv.Itoa(resp.exemplars))
	}
	if resp.status == http.StatusMethodNotAllowed {
		hdr.Set("Allow", http.MethodPost)
	}
	if resp.status == http.StatusNoContent {
		w.WriteHeader(resp.status)
	} else {
		hdr.Set("Content-Type", "text/plain; charset=utf-8")
		hdr.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(resp.status)
		_, _ = io.WriteString(w, resp.body+"\n")
	}

	ver := resp.version.label()
	h.metrics.requests.WithLabelValues(ver, strconv.Itoa(resp.status)).Inc()
	h.metrics.duration.WithLabelValues(ver).Observe(time.Since(start).Seconds())
	switch {
	case resp.status == http.StatusServiceUnavailable:
		if ok, n := h.internalLog.allow(); ok {
			h.logger.Warn("remote write deferred", "status", resp.status, "version", ver, "err", resp.body, "suppressed", n)
		}
	case resp.status >= 500:
		if ok, n := h.internalLog.allow(); ok {
			h.logger.Error("remote write failed", "status", resp.status, "version", ver, "err", resp.body, "suppressed", n)
		}
	case resp.status >= 400:
		if ok, n := h.refusedLog.allow(); ok {
			h.logger.Warn("remote write refused", "status", resp.status, "version", ver, "err", resp.body,
				"remote", r.RemoteAddr, "user_agent", r.UserAgent(), "suppressed", n)
		}
	}
}

// serve handles r; a panic costs this request only: it is answered 500,
// logged with its stack and counted, and the server goes on.
func (h *writeHandler) serve(r *http.Request) (resp response) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		h.metrics.panics.Inc()
		if ok, n := h.panicLog.allow(); ok {
			h.logger.Error("panic while handling a remote-write request", "panic", p, "stack", string(debug.Stack()), "suppressed", n)
		}
		ver, _ := parseContentType(r.Header.Get("Content-Type"))
		resp = response{version: ver, status: http.StatusInternalServerError,
			body: fmt.Sprintf("internal error while handling the request, retry later: panic: %v", p)}
	}()
	return h.handle(r)
}

// acquireSlot takes one of the request slots, waiting up to MaxQueueWait
// (the body is not read meanwhile, so a waiting request holds no decoder memory).
func (h *writeHandler) acquireSlot(r *http.Request) bool {
	select {
	case h.slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(h.limits.MaxQueueWait)
	defer t.Stop()
	select {
	case h.slots <- struct{}{}:
		return true
	case <-t.C:
	case <-r.Context().Done():
	}
	return false
}

// handle processes one request.
func (h *writeHandler) handle(r *http.Request) response {
	if r.Method != http.MethodPost {
		return response{status: http.StatusMethodNotAllowed, body: "method " + r.Method + " not allowed: remote write accepts POST only"}
	}
	ver, err := parseContentType(r.Header.Get("Content-Type"))
	if err != nil {
		return response{status: http.StatusUnsupportedMediaType, body: err.Error()}
	}
	resp := response{version: ver}
	if err := checkEncoding(r.Header.Values("Content-Encoding")); err != nil {
		return resp.fail(http.StatusUnsupportedMediaType, err.Error())
	}
	t, refused := h.resolveTenant(r, resp)
	if refused != nil {
		return *refused
	}
	if !h.acquireSlot(r) {
		return resp.busy(fmt.Sprintf("too many concurrent write requests (the limit is %d; waited %v), retry later", cap(h.slots), h.limits.MaxQueueWait))
	}
	defer func() { <-h.slots }()
	h.metrics.inflightRequests.Inc()
	defer h.metrics.inflightRequests.Dec()

	d := h.pool.Get().(*decoder)
	d.resolver, _ = t.App.(SeriesResolver)
	d.limits = h.tenantLimits(&t)
	resp = h.process(d, &t, r, resp)
	// Not deferred: a decoder a panic interrupted is dropped, not pooled.
	d.release()
	h.pool.Put(d)
	return resp
}

// process reads, decodes and stores one request with d.
func (h *writeHandler) process(d *decoder, t *WriteTenant, r *http.Request, resp response) response {
	ver := resp.version
	body, err := d.readBody(r)
	if err != nil {
		return resp.failErr(err)
	}
	h.metrics.requestBytes.Observe(float64(len(body)))
	n, err := d.decodedLen(body)
	if err != nil {
		return resp.failErr(err)
	}
	if !h.inflight.acquire(int64(n)) {
		return resp.busy(fmt.Sprintf("the write requests in flight and this one would hold more than %d decoded bytes, the limit, retry later", h.limits.MaxInflightBytes))
	}
	h.metrics.inflightBytes.Add(float64(n))
	defer func() {
		h.inflight.release(int64(n))
		h.metrics.inflightBytes.Sub(float64(n))
	}()
	raw, err := d.decompress(body)
	if err != nil {
		return resp.failErr(err)
	}
	batch, err := d.decode(ver, raw)
	if err != nil {
		return resp.failErr(err)
	}
	st := &d.stats
	h.metrics.samplesReceived.WithLabelValues(ver.label()).Add(float64(st.samples))
	if st.histograms > 0 {
		h.metrics.histogramsReceived.WithLabelValues(ver.label()).Add(float64(st.histograms))
	}

	if refused := h.admit(t, st.samples+st.histograms, resp); refused != nil {
		return *refused
	}

	var res head.AppendResult
	if len(batch.Series) > 0 || len(batch.Metadata) > 0 {
		res, err = t.App.AppendBatch(r.Context(), batch)
		if errors.Is(err, head.ErrSeriesGone) {
			// A series resolved from the decoder's cache left the head
			// meanwhile (GC of an idle target): nothing was stored; decode
			// again, now by labels, and store once more.
			if batch, err = d.decode(ver, raw); err != nil {
				return resp.failErr(err)
			}
			res, err = t.App.AppendBatch(r.Context(), batch)
		}
		if err != nil {
			resp.samples, resp.histograms = res.SamplesWritten, res.HistogramsWritten
			if errors.Is(err, tenant.ErrTooMany) || errors.Is(err, tenant.ErrInvalid) {
				return resp.fail(http.StatusBadRequest, err.Error())
			}
			if errors.Is(err, head.ErrUnavailable) {
				resp.retryAfter = retryAfterUnavailable
				return resp.fail(http.StatusServiceUnavailable, fmt.Sprintf("storage unavailable, nothing of the request was acknowledged, retry later: %v", err))
			}
			return resp.fail(http.StatusInternalServerError, fmt.Sprintf("storing the request failed, retry later: %v", err))
		}
	}
	resp.samples = res.SamplesWritten
	resp.histograms = res.HistogramsWritten
	resp.exemplars = res.ExemplarsWritten
	exemplarsLost := st.exemplars - res.ExemplarsWritten
	if exemplarsLost > 0 {
		// Out of order for their series, beyond the exemplar limit, or on an invalid series.
		h.metrics.dropped.WithLabelValues(droppedExemplar).Add(float64(exemplarsLost))
	}

	// Merge the storage's refusals with the decoder's.
	for reason, n := range st.invalid.Rejected {
		res.Reject(reason, n, st.invalid.Examples[reason])
	}
	for reason, n := range res.Rejected {
		h.metrics.samplesRejected.WithLabelValues(head.ReasonLabel(reason), t.ID).Add(float64(n))
	}

	unwritten := res.RejectedTotal() > 0 || ver == protoV2 && exemplarsLost > 0
	if !unwritten {
		resp.status = http.StatusNoContent
		return resp
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "partial write: %d of %d samples written", resp.samples, st.samples)
	if st.histograms > 0 || st.exemplars > 0 {
		fmt.Fprintf(&sb, ", %d of %d histograms, %d of %d exemplars", resp.histograms, st.histograms, res.ExemplarsWritten, st.exemplars)
	}
	if err := res.Err(); err != nil {
		sb.WriteString("\n")
		sb.WriteString(err.Error())
	}
	if exemplarsLost > 0 {
		fmt.Fprintf(&sb, "\n%d exemplars not written: %v (e.g. series %s)", exemplarsLost, errExemplarsRefused, st.exemplarSeries)
	}
	resp.status = http.StatusBadRequest
	resp.body = sb.String()
	return resp
}

// fail returns r answering status with body.
func (r response) fail(status int, body string) response {
	r.status, r.body = status, body
	return r
}

// busy returns r answering 503 with Retry-After: tandem is busy, nothing was stored, a retry can succeed.
func (r response) busy(body string) response {
	r.retryAfter = retryAfterBusy
	return r.fail(http.StatusServiceUnavailable, body)
}

// failErr returns r answering a whole-request failure.
func (r response) failErr(err error) response {
	var re *requestError
	if errors.As(err, &re) {
		return r.fail(re.status, re.msg)
	}
	return r.fail(http.StatusInternalServerError, err.Error())
}

// logLimiter lets one log line through per interval and counts the ones it held back.
type logLimiter struct {
	every      time.Duration
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// allow reports whether a line may be logged now and how many were suppressed since the last one.
func (l *logLimiter) allow() (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.suppressed++
		return false, 0
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	return true, n
}

// byteBudget bounds a sum of sizes held at once (the decoded bytes of the
// requests in flight). A request alone always fits, so any request the
// decoded-size limit admits can eventually run.
type byteBudget struct {
	mu   sync.Mutex
	used int64
	max  int64
}

// acquire takes n bytes of the budget, reporting whether they were free.
func (b *byteBudget) acquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used > 0 && b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

// release gives back n bytes acquire took.
func (b *byteBudget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

package remote

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tandem-tsdb/tandem/limits"
	"github.com/tandem-tsdb/tandem/tenant"
)

// Tenants finds the tenant of a write request: where its samples go and
// the limits that apply to it.
type Tenants interface {
	// WriteTenant returns r's tenant. An error wrapping tenant.ErrInvalid
	// or tenant.ErrTooMany is answered 400 (a retry cannot cure it), any
	// other 503 with Retry-After.
	WriteTenant(r *http.Request) (WriteTenant, error)
}

// WriteTenant is one tenant as the write handler sees it.
type WriteTenant struct {
	// ID names the tenant in metrics and messages.
	ID string
	// App stores the tenant's samples.
	App Appender
	// MaxLabelsPerSeries, MaxLabelNameLength and MaxLabelValueLength
	// replace the handler's Limits when positive.
	MaxLabelsPerSeries, MaxLabelNameLength, MaxLabelValueLength int
	// Rate, when set, admits the request's samples at the tenant's
	// ingestion rate; IngestionRate and IngestionBurst are its settings,
	// for the message of a refusal.
	Rate           *limits.Bucket
	IngestionRate  float64
	IngestionBurst float64
}

// oneTenant serves every request from one appender (no tenancy).
type oneTenant struct{ app Appender }

func (o oneTenant) WriteTenant(*http.Request) (WriteTenant, error) {
	return WriteTenant{ID: tenant.DefaultID, App: o.app}, nil
}

// NewTenantWriteHandler returns a remote-write handler (as NewWriteHandler's)
// that writes each request to its tenant's storage, as ts finds it.
func NewTenantWriteHandler(ts Tenants, opts WriteHandlerOptions) http.Handler {
	return newWriteHandler(ts, opts)
}

// resolveTenant returns r's tenant or the answer refusing the request.
func (h *writeHandler) resolveTenant(r *http.Request, resp response) (WriteTenant, *response) {
	t, err := h.tenants.WriteTenant(r)
	if err == nil {
		return t, nil
	}
	if errors.Is(err, tenant.ErrInvalid) || errors.Is(err, tenant.ErrTooMany) {
		resp = resp.fail(http.StatusBadRequest, err.Error())
	} else {
		resp.retryAfter = retryAfterUnavailable
		resp = resp.fail(http.StatusServiceUnavailable, fmt.Sprintf("the tenant's storage cannot be opened, retry later: %v", err))
	}
	return t, &resp
}

// tenantLimits returns the request limits with t's label limits.
func (h *writeHandler) tenantLimits(t *WriteTenant) Limits {
	l := h.limits
	if t.MaxLabelsPerSeries > 0 {
		l.MaxLabelsPerSeries = t.MaxLabelsPerSeries
	}
	if t.MaxLabelNameLength > 0 {
		l.MaxLabelNameLength = t.MaxLabelNameLength
	}
	if t.MaxLabelValueLength > 0 {
		l.MaxLabelValueLength = t.MaxLabelValueLength
	}
	return l
}

// admit takes n samples of t's ingestion rate, or returns the answer
// refusing the request: 429 (or the configured status) with Retry-After.
func (h *writeHandler) admit(t *WriteTenant, n int, resp response) *response {
	if t.Rate == nil || n == 0 {
		return nil
	}
	ok, wait := t.Rate.Take(n, time.Now())
	if ok {
		return nil
	}
	h.metrics.samplesRejected.WithLabelValues(reasonRateLimited, t.ID).Add(float64(n))
	resp.retryAfter = limits.Retry(wait)
	resp = resp.fail(h.rateLimitedStatus, fmt.Sprintf(
		"tenant %q is over its ingestion rate limit (ingestion_rate %g samples/s, ingestion_burst %g) with %d samples; nothing of the request was written, retry in %ds",
		t.ID, t.IngestionRate, t.IngestionBurst, n, resp.retryAfter))
	return &resp
}

// reasonRateLimited is the reason label of samples refused by a tenant's ingestion rate.
const reasonRateLimited = "rate_limited"

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tandem-tsdb/tandem/workload"
)

// Workload is a pre-encoded remote-write workload: every shard's requests in
// send order, ready to be replayed against any receiver.
type Workload struct {
	Version  int
	Shards   [][]Batch
	Samples  int64
	Series   int
	Targets  int
	Scrapes  int
	Interval time.Duration
	MinT     int64 // first scrape (ms)
	MaxT     int64 // last scrape (ms)
	Bytes    int64 // encoded body bytes
	// Histograms marks the native-histogram workload; HistSamples of its
	// Samples are histogram samples (the rest floats).
	Histograms  bool
	HistSamples int64
	// EntropyFloor is the generator's EntropyBytesPerSample.
	EntropyFloor float64
	// First is, per shard, how many of its requests carry the first
	// scrape of every target: the requests that create every series.
	First []int
	// FirstSamples is the samples of those requests.
	FirstSamples int64
}

// Batch is one encoded request.
type Batch struct {
	workload.Encoded
	Round int // batch-deadline window of its oldest sample
}

// WorkloadOptions sizes a workload.
type WorkloadOptions struct {
	Targets  int
	Scrapes  int
	Interval time.Duration
	Version  int // remote-write 1 or 2
	Shards   int
	Seed     uint64
	End      time.Time // time of the last scrape; default now
	// Histograms replays workload.HistogramGenerator (native histograms,
	// NHCB and a few floats) instead of the node_exporter-like floats.
	Histograms bool
}

// roundSource is a generator of scrape rounds.
type roundSource interface {
	Next() []workload.Scrape
	SeriesPerTarget() int
}

// BuildWorkload generates node_exporter-like scrapes (workload.Generator,
// modelled on the real scrapes in ../shared/data) round by round, batches
// them like Prometheus's queue manager (series hashed onto shards, at most
// 2000 samples per request, 5 s batch deadline) and encodes every request,
// so that nothing but sending is left for the timed phase.
func BuildWorkload(o WorkloadOptions) (*Workload, error) {
	if o.End.IsZero() {
		o.End = time.Now()
	}
	start := o.End.Add(-time.Duration(o.Scrapes-1) * o.Interval).Truncate(time.Second)
	if o.Histograms {
		start = start.Add(-o.Interval) // its targets scrape up to an interval after the round's start
	}
	var (
		g       roundSource
		entropy float64
	)
	if o.Histograms {
		g = workload.NewHistogramGenerator(workload.HistogramOptions{Targets: o.Targets, Scrapes: o.Scrapes, Interval: o.Interval, Start: start, Seed: o.Seed})
	} else {
		fg, err := workload.NewGenerator(workload.Options{
			Targets: o.Targets, Scrapes: o.Scrapes, Interval: o.Interval, Start: start, Seed: o.Seed, Histogram: true,
		})
		if err != nil {
			return nil, err
		}
		g, entropy = fg, fg.EntropyBytesPerSample()
	}
	w := &Workload{Version: o.Version, Shards: make([][]Batch, o.Shards), Targets: o.Targets, Scrapes: o.Scrapes, Histograms: o.Histograms,
		Interval: o.Interval, Series: o.Targets * g.SeriesPerTarget(), MinT: start.UnixMilli(), EntropyFloor: entropy}
	var encErr error
	b, err := workload.NewBatcher(workload.SendOptions{Version: o.Version, Shards: o.Shards, MaxSamplesPerSend: 2000}, func(r workload.Request) error {
		e, err := r.Encode()
		if err != nil {
			encErr = err
			return err
		}
		w.Shards[r.Shard] = append(w.Shards[r.Shard], Batch{Encoded: e, Round: r.Round})
		w.Samples += int64(e.Samples)
		w.Bytes += int64(len(e.Body))
		return nil
	})
	if err != nil {
		return nil, err
	}
	for first := true; ; first = false {
		round := g.Next()
		if round == nil {
			break
		}
		for _, sc := range round {
			w.MaxT = max(w.MaxT, sc.T)
			for i := range sc.Samples {
				if sc.Samples[i].H != nil {
					w.HistSamples++
				}
			}
		}
		if err := b.Add(round); err != nil {
			return nil, fmt.Errorf("encode: %w", errors.Join(err, encErr))
		}
		if first {
			// The first scrape's requests go out on their own: sent as a
			// phase of their own, they time series creation.
			if err := b.Flush(); err != nil {
				return nil, fmt.Errorf("encode: %w", errors.Join(err, encErr))
			}
			w.First = make([]int, len(w.Shards))
			for sh := range w.Shards {
				w.First[sh] = len(w.Shards[sh])
				for _, b := range w.Shards[sh] {
					w.FirstSamples += int64(b.Samples)
				}
			}
		}
	}
	if err := b.Flush(); err != nil {
		return nil, fmt.Errorf("encode: %w", errors.Join(err, encErr))
	}
	return w, nil
}

// SendResult is the outcome of replaying a workload.
type SendResult struct {
	Duration time.Duration
	Requests int64
	Samples  int64
	Retries  int64
}

// Send replays w against writeURL: every shard sends its requests in order
// on its own connection, shards concurrently, retrying 5xx and network
// errors with backoff as Prometheus's queue manager does. Shards may run
// ahead of the slowest by at most slack batch rounds (Prometheus's receiver
// refuses samples more than an hour older than its newest).
func Send(ctx context.Context, writeURL string, w *Workload, slack int) (SendResult, error) {
	return sendRange(ctx, writeURL, w, slack, func(int) (int, int) { return 0, -1 })
}

// sendRange is Send of the requests span(shard) selects of each shard (from,
// to; to -1: to the end).
func sendRange(ctx context.Context, writeURL string, w *Workload, slack int, span func(sh int) (int, int)) (SendResult, error) {
	var (
		res      SendResult
		wg       sync.WaitGroup
		mu       sync.Mutex
		errs     []error
		progress = make([]atomic.Int64, len(w.Shards)) // round of each shard's next request
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	minRound := func() int64 {
		m := int64(1 << 62)
		for i := range progress {
			m = min(m, progress[i].Load())
		}
		return m
	}
	start := time.Now()
	for sh := range w.Shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer progress[sh].Store(1 << 62)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
			from, to := span(sh)
			if to < 0 {
				to = len(w.Shards[sh])
			}
			for i := from; i < to; i++ {
				b := w.Shards[sh][i]
				progress[sh].Store(int64(b.Round))
				for int64(b.Round) > minRound()+int64(slack) {
					if ctx.Err() != nil {
						return
					}
					time.Sleep(time.Millisecond)
				}
				retries, err := sendOne(ctx, client, writeURL, b.Encoded)
				atomic.AddInt64(&res.Retries, int64(retries))
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("shard %d request %d: %w", sh, i, err))
					mu.Unlock()
					cancel()
					return
				}
				atomic.AddInt64(&res.Requests, 1)
				atomic.AddInt64(&res.Samples, int64(b.Samples))
			}
		}()
	}
	wg.Wait()
	res.Duration = time.Since(start)
	return res, errors.Join(errs...)
}

// sendOne posts one request, retrying 5xx, 429 and network errors with
// exponential backoff (50 ms to 2 s, at most 20 times).
func sendOne(ctx context.Context, client *http.Client, writeURL string, e workload.Encoded) (int, error) {
	backoff := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		req, err := e.NewHTTPRequest(ctx, writeURL)
		if err != nil {
			return attempt, err
		}
		resp, err := client.Do(req)
		var status int
		var body []byte
		if err == nil {
			body, _ = io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			status = resp.StatusCode
			if status/100 == 2 {
				return attempt, nil
			}
			if status/100 == 4 && status != http.StatusTooManyRequests {
				return attempt, fmt.Errorf("%d: %s", status, bytes.TrimSpace(body))
			}
			err = fmt.Errorf("%d: %s", status, bytes.TrimSpace(body))
		}
		if attempt >= 20 || ctx.Err() != nil {
			return attempt, fmt.Errorf("giving up after %d attempts: %w", attempt+1, err)
		}
		select {
		case <-ctx.Done():
			return attempt, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

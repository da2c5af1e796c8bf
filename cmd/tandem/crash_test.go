package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/tandem-tsdb/tandem/workload"
)

const (
	crashSenders      = 6
	crashSeriesPerReq = 3
	crashSamplesPer   = 5
	crashMaxReqs      = 20000 // per sender per phase: bounds the load
)

// crashLedger records, per sender, every request attempted and whether it was acknowledged.
type crashLedger struct {
	base    int64 // ms; request i of a sender holds timestamps base+(i*crashSamplesPer+k)*step
	step    int64 // ms between a sender's samples
	senders int   // senders in use, at most crashSenders
	mu      sync.Mutex
	tried   [crashSenders]map[int]bool // request index -> acknowledged
	nextReq [crashSenders]int
	acks    int // acknowledged requests, all phases
}

func crashValue(sender, req, series, k int) float64 {
	return float64(sender)*1e7 + float64(req)*100 + float64(series)*10 + float64(k) + 0.125
}

func crashLabels(sender, series int) labels.Labels {
	return labels.FromStrings("__name__", "crash_test", "job", "crash", "instance", fmt.Sprintf("sender-%d", sender), "series", strconv.Itoa(series))
}

// request builds request i of a sender: every series gets its own samples at
// timestamps no other request uses.
func (l *crashLedger) request(sender, i int) (remoteapi.WriteMessageType, any) {
	ts := func(k int) int64 { return l.base + int64(i*crashSamplesPer+k)*l.step }
	if sender%2 == 0 {
		req := &prompb.WriteRequest{}
		for j := range crashSeriesPerReq {
			var s prompb.TimeSeries
			crashLabels(sender, j).Range(func(lb labels.Label) { s.Labels = append(s.Labels, prompb.Label{Name: lb.Name, Value: lb.Value}) })
			for k := range crashSamplesPer {
				s.Samples = append(s.Samples, prompb.Sample{Timestamp: ts(k), Value: crashValue(sender, i, j, k)})
			}
			req.Timeseries = append(req.Timeseries, s)
		}
		return remoteapi.WriteV1MessageType, req
	}
	st := writev2.NewSymbolTable()
	req := &writev2.Request{}
	for j := range crashSeriesPerReq {
		s := writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(crashLabels(sender, j), nil),
			Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: st.Symbolize("crash test gauge")}}
		for k := range crashSamplesPer {
			s.Samples = append(s.Samples, writev2.Sample{Timestamp: ts(k), Value: crashValue(sender, i, j, k)})
		}
		req.Timeseries = append(req.Timeseries, s)
	}
	req.Symbols = st.Symbols()
	return remoteapi.WriteV2MessageType, req
}

// run has every sender send requests concurrently to p until stop is closed,
// a request fails or crashMaxReqs is reached; it returns once all stopped.
func (l *crashLedger) run(t *testing.T, p *tandemProc, stop <-chan struct{}) {
	t.Helper()
	api, err := workload.NewClient(p.url+"/api/v1/write", workload.SendOptions{
		Version: 1, Backoff: remoteapi.BackoffConfig{Min: 10 * time.Millisecond, Max: 20 * time.Millisecond, MaxRetries: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	// Senders stay in step (within a few requests) so that none lags a block
	// range behind the others; a phase starts them all at the same request.
	var active [crashSenders]bool
	l.mu.Lock()
	top := 0
	for s := range l.senders {
		top = max(top, l.nextReq[s])
		active[s] = true
	}
	for s := range l.senders {
		l.nextReq[s] = top
	}
	l.mu.Unlock()
	ahead := func(s int) bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for o := range l.senders {
			if o != s && active[o] && l.nextReq[s] > l.nextReq[o]+4 {
				return true
			}
		}
		return false
	}
	for s := range l.senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { l.mu.Lock(); active[s] = false; l.mu.Unlock() }()
			for n := 0; n < crashMaxReqs; n++ {
				select {
				case <-stop:
					return
				default:
				}
				for ahead(s) {
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Microsecond):
					}
				}
				l.mu.Lock()
				i := l.nextReq[s]
				l.nextReq[s]++
				l.tried[s][i] = false
				l.mu.Unlock()
				typ, msg := l.request(s, i)
				if _, err := api.Write(ctx, typ, msg); err != nil {
					select {
					case <-stop:
					default:
						t.Logf("sender %d request %d: %v", s, i, err)
					}
					return
				}
				l.mu.Lock()
				l.tried[s][i] = true
				l.acks++
				l.mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// inFlightLocked counts the senders whose latest request is not
// acknowledged; l.mu is held.
func (l *crashLedger) inFlightLocked() int {
	n := 0
	for s := range l.senders {
		if i := l.nextReq[s] - 1; i >= 0 {
			if acked, tried := l.tried[s][i]; tried && !acked {
				n++
			}
		}
	}
	return n
}

// verify checks that every acknowledged request is fully present with exact
// values, that unacknowledged ones are all or nothing, and nothing else is there.
func (l *crashLedger) verify(t *testing.T, p *tandemProc) {
	t.Helper()
	var d queryData
	p.api(t, "/api/v1/query", url.Values{"query": {"crash_test[3h]"}, "time": {fmtTime(time.Now().UnixMilli())}}, true, &d)
	got := map[string]map[int64]float64{}
	total := 0
	for _, s := range decodeResult(t, d) {
		m := map[int64]float64{}
		for i, ts := range s.T {
			m[ts] = s.V[i]
		}
		got[s.Labels] = m
		total += len(s.T)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	want, acked, lost, whole := 0, 0, 0, 0
	for s := range l.senders {
		for i, ok := range l.tried[s] {
			present := 0
			for j := range crashSeriesPerReq {
				m := got[crashLabels(s, j).String()]
				for k := range crashSamplesPer {
					ts := l.base + int64(i*crashSamplesPer+k)*l.step
					v, found := m[ts]
					if !found {
						continue
					}
					present++
					if w := crashValue(s, i, j, k); v != w {
						t.Errorf("sender %d request %d series %d at %d: value %v, want %v", s, i, j, ts, v, w)
					}
				}
			}
			n := crashSeriesPerReq * crashSamplesPer
			want += present
			switch {
			case ok && present != n:
				t.Errorf("sender %d request %d was acknowledged but only %d of %d samples survived", s, i, present, n)
			case !ok && present != 0 && present != n:
				t.Errorf("sender %d request %d (not acknowledged) is half visible: %d of %d samples", s, i, present, n)
			case ok:
				acked++
			case present == n:
				whole++
			default:
				lost++
			}
		}
	}
	if total != want {
		t.Errorf("tandem holds %d crash_test samples, but the requests tried account for %d", total, want)
	}
	t.Logf("verified %d acknowledged requests; unacknowledged: %d fully present, %d absent; %d samples", acked, whole, lost, total)
}

// TestCrashDurability kills tandem with SIGKILL twice while requests are in
// flight and checks after each restart that every acknowledged sample is
// there and no request is half visible; then checks a clean SIGTERM restart.
func TestCrashDurability(t *testing.T) {
	t.Run("head", func(t *testing.T) {
		testCrashDurability(t, 1, crashSenders, "--storage.wal.sync-interval=1s")
	})
	// Samples 5 ms apart and 2 s blocks flushed every 40 ms: the kills land
	// in the middle of block writes, head truncations and WAL checkpoints.
	// Two senders (1.0 and 2.0) that stay in step: a sender lagging a block
	// range behind would be refused as too old (until the late-data issue).
	t.Run("flushing", func(t *testing.T) {
		testCrashDurability(t, 5, 2, "--storage.wal.sync-interval=1s", "--storage.block-range=2s", "--head.maintenance-interval=10ms")
	})
}

func testCrashDurability(t *testing.T, step int64, senders int, args ...string) {
	dir := t.TempDir()
	l := &crashLedger{base: time.Now().Add(-time.Hour).UnixMilli(), step: step, senders: senders}
	for s := range l.senders {
		l.tried[s] = map[int]bool{}
	}
	p := startTandem(t, dir, args...)
	for crash := 1; crash <= 2; crash++ {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { l.run(t, p, stop); close(done) }()
		// Kill once this phase has some acknowledged requests, mid-stream:
		// when a request is in flight (on a loaded machine every sender can
		// be between two requests at the moment the count is reached).
		l.mu.Lock()
		target := l.acks + 300*l.senders
		l.mu.Unlock()
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(time.Millisecond) {
			l.mu.Lock()
			n, sending := l.acks, l.inFlightLocked() > 0
			l.mu.Unlock()
			if n >= target && sending {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("crash %d: only %d of %d requests acknowledged after 15s\n%s", crash, n, target, p.log)
			}
		}
		p.signal(syscall.SIGKILL)
		close(stop)
		<-done
		l.mu.Lock()
		for s := range l.senders {
			if len(l.tried[s]) == 0 {
				t.Errorf("crash %d: sender %d was not sending when killed", crash, s)
			}
		}
		inFlight := l.inFlightLocked()
		l.mu.Unlock()
		if inFlight == 0 {
			t.Errorf("crash %d: no request was in flight at the kill", crash)
		}
		t.Logf("crash %d: %d requests were in flight", crash, inFlight)
		p = startTandem(t, dir, args...)
		l.verify(t, p)
	}

	// A clean shutdown after a few more requests keeps everything; with no
	// crash, every request of this phase must have been acknowledged.
	l.mu.Lock()
	from := l.nextReq
	l.mu.Unlock()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { l.run(t, p, stop); close(done) }()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	<-done
	l.mu.Lock()
	for s := range l.senders {
		if l.nextReq[s] == from[s] {
			t.Errorf("sender %d sent nothing before the clean shutdown", s)
		}
		for i := from[s]; i < l.nextReq[s]; i++ {
			if acked, tried := l.tried[s][i]; tried && !acked {
				t.Errorf("sender %d request %d failed without a crash", s, i)
			}
		}
	}
	l.mu.Unlock()
	p.signal(syscall.SIGTERM)
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("tandem exited with %d after SIGTERM\n%s", code, p.log)
	}
	p = startTandem(t, dir, args...)
	l.verify(t, p)
	if step > 1 {
		if c := blocksCoverage(t, p); c < 5*2000 {
			t.Errorf("blocks cover only %d ms: the kills did not exercise flushing", c)
		}
	}
}

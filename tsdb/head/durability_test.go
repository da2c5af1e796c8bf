package head

import (
	"github.com/tandem-tsdb/tandem/tsdb/internal/tsdbtest"

	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/internal/tmpfs"
	"github.com/tandem-tsdb/tandem/tsdb/wal"
)

// scrape builds one scrape of n series of a target at t.
func scrape(target string, n int, t int64) *Batch {
	b := &Batch{}
	for i := range n {
		b.Series = append(b.Series, BatchSeries{
			Labels:  series("m", "job", "j", "instance", target, "i", fmt.Sprint(i)),
			Samples: []Sample{{T: t, V: float64(i) + float64(t)/1000}},
		})
	}
	return b
}

// TestFullDiskNeverAcknowledges fills the disk under the WAL and retries a
// write as Prometheus does: no attempt may succeed while the record cannot
// be written, writes resume by themselves once space returns, and what was
// acknowledged survives a crash (the directory copied without closing).
func TestFullDiskNeverAcknowledges(t *testing.T) {
	mnt := tmpfs.Mount(t, 8<<20)
	dir := filepath.Join(mnt, "data")
	const now = int64(1 << 50)
	h := openHead(t, dir, func(o *Options) { o.WALSegmentSize = 1 << 20 })
	defer h.Close()
	want := model{}
	add := func(b *Batch) {
		for _, s := range b.Series {
			for _, smp := range s.Samples {
				want.Add(s.Labels, smp.T, smp.V)
			}
		}
	}
	first := scrape("a", 20, now)
	if _, err := h.AppendBatch(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	add(first)

	filler := tmpfs.Fill(t, mnt)
	// The segment's last page may still take a few records: write until
	// the disk refuses one.
	var b *Batch
	for i := 1; ; i++ {
		if i > 10000 {
			t.Fatal("the full disk took 10000 records")
		}
		b = scrape("a", 20, now+int64(i)*15000)
		if _, err := h.AppendBatch(context.Background(), b); err != nil {
			break
		}
		add(b)
	}
	for attempt := range 5 {
		_, err := h.AppendBatch(context.Background(), b)
		if err == nil {
			t.Fatalf("attempt %d acknowledged while the disk is full", attempt)
		}
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("attempt %d: %v, want ErrUnavailable", attempt, err)
		}
		time.Sleep(probeMinInterval)
	}
	if err := h.Writable(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Writable on a full disk: %v", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.health.failing.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the head did not notice that space returned")
		}
		time.Sleep(50 * time.Millisecond)
	}
	res, err := h.AppendBatch(context.Background(), b)
	if err != nil || res.SamplesWritten != 20 {
		t.Fatalf("retry after space returned: %+v, %v", res, err)
	}
	add(b)

	// A crash now: the files as they are, the head not closed.
	crashed := t.TempDir()
	tsdbtest.CopyTree(t, dir, crashed)
	h2 := openHead(t, crashed, nil)
	defer h2.Close()
	compareModels(t, want, readAll(t, h2, math.MinInt64, math.MaxInt64))
}

// TestResentSamplesAreLogged: a sample already in memory but never logged
// (its request failed) is logged by the retry that gets acknowledged.
func TestResentSamplesAreLogged(t *testing.T) {
	dir := t.TempDir()
	h := openHead(t, dir, nil)
	b := scrape("a", 3, 1<<50)
	// Place the samples without logging them, as a failed WAL write leaves them.
	h.wal.Close()
	if _, err := h.AppendBatch(context.Background(), b); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("append with a closed WAL: %v", err)
	}
	w, err := wal.Open(h.walDir(), wal.Options{SyncInterval: 0})
	if err != nil {
		t.Fatal(err)
	}
	h.wal = w
	h.health.lastProbe = time.Time{}
	if res, err := h.AppendBatch(context.Background(), b); err != nil || res.SamplesWritten != 3 {
		t.Fatalf("retry: %+v, %v", res, err)
	}
	h.Close()
	h2 := openHead(t, dir, nil)
	defer h2.Close()
	if got := readAll(t, h2, math.MinInt64, math.MaxInt64); len(got) != 3 {
		t.Fatalf("after restart %d series, want 3 (the retry's samples were not logged)", len(got))
	}
}

// TestTimestampExtremes sends timestamps no scraper makes: refused with a
// reason, while the edges of the accepted interval are kept.
func TestTimestampExtremes(t *testing.T) {
	const now = int64(1 << 50)
	day := (24 * time.Hour).Milliseconds()
	skew := (10 * time.Minute).Milliseconds()
	for _, tc := range []struct {
		name   string
		maxAge time.Duration
		ts     int64
		want   error
	}{
		{"MinInt64", 24 * time.Hour, math.MinInt64, ErrTooOldSample},
		{"MinInt64+1", 24 * time.Hour, math.MinInt64 + 1, ErrTooOldSample},
		{"-1", 24 * time.Hour, -1, ErrTooOldSample},
		{"0", 24 * time.Hour, 0, ErrTooOldSample},
		{"just too old", 24 * time.Hour, now - day - 1, ErrTooOldSample},
		{"oldest accepted", 24 * time.Hour, now - day, nil},
		{"now", 24 * time.Hour, now, nil},
		{"newest accepted", 24 * time.Hour, now + skew, nil},
		{"just too new", 24 * time.Hour, now + skew + 1, ErrTooFarInFuture},
		{"MaxInt64", 24 * time.Hour, math.MaxInt64, ErrTooFarInFuture},
		// Without an age bound, what no block range can hold is still refused.
		{"unbounded MinInt64+1", 0, math.MinInt64 + 1, ErrTooOldSample},
		{"unbounded 0", 0, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := openHead(t, t.TempDir(), func(o *Options) { o.MaxSampleAge = tc.maxAge })
			defer h.Close()
			l := series("m", "job", "j", "instance", "i")
			res, err := h.AppendBatch(context.Background(), &Batch{Series: []BatchSeries{{Labels: l, Samples: []Sample{{T: tc.ts, V: 1}}}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Err(); !errors.Is(got, tc.want) || (tc.want == nil) != (got == nil) {
				t.Fatalf("sample at %d: %v, want %v", tc.ts, got, tc.want)
			}
		})
	}
}

// TestAppendPanicReleasesGroupLock: a panic while a batch holds its group's
// lock must not leave the group locked for every later writer.
func TestAppendPanicReleasesGroupLock(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	testHookAppendGroup = func(*group) { panic("injected") }
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "injected") {
				t.Fatalf("recovered %v", r)
			}
		}()
		h.AppendBatch(context.Background(), scrape("a", 2, 1<<50))
	}()
	testHookAppendGroup = nil
	done := make(chan error, 1)
	go func() {
		_, err := h.AppendBatch(context.Background(), scrape("a", 2, 1<<50+15000))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the group stayed locked after a panic")
	}
	if got := readAll(t, h, math.MinInt64, math.MaxInt64, labels.MustNewMatcher(labels.MatchEqual, "instance", "a")); len(got) != 2 {
		t.Fatalf("%d series, want 2", len(got))
	}
}

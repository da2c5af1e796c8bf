package head

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
)

const snapshotPanicChildEnv = "TANDEM_SNAPSHOT_PANIC_CHILD"

// TestSnapshotPanic: a panic while the head snapshots a group for a query,
// on the parallel snapshot goroutines (4800 series) and on the query's own
// goroutine (a selection of 200), fails that query with an error, logged
// with its stack; the group is unlocked (its next write goes through) and
// the next query works. Without the recover, a panic on a snapshot goroutine
// ends the process, and one on the caller's leaves the group locked: the
// check runs in a child process, so the test fails rather than crashes.
func TestSnapshotPanic(t *testing.T) {
	if os.Getenv(snapshotPanicChildEnv) == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSnapshotPanic$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), snapshotPanicChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestSnapshotPanic")) {
			t.Fatalf("child process: %v\n%s", err, out)
		}
		return
	}
	if runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2) // the parallel snapshot needs two
	}
	var logs bytes.Buffer
	h := openHead(t, t.TempDir(), func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	defer h.Close()
	const instances, members = 8, 600
	appendAll := func(ts int64) {
		t.Helper()
		for i := range instances {
			b := &Batch{}
			for m := range members {
				b.Series = append(b.Series, BatchSeries{Labels: series("m", "job", "j", "instance", fmt.Sprint("i", i), "m", fmt.Sprint(m)),
					Samples: []Sample{{T: ts, V: float64(m)}}})
			}
			if _, err := h.AppendBatch(context.Background(), b); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendAll(1000)
	snapshotGroupHook = func(g *group) {
		if len(g.members) > 0 && g.members[0].lset.Get("instance") == "i3" {
			panic("injected snapshot bug")
		}
	}
	for _, sel := range []*labels.Matcher{
		labels.MustNewMatcher(labels.MatchEqual, "__name__", "m"),       // 4800 series: parallel
		labels.MustNewMatcher(labels.MatchRegexp, "m", "1[0-9]?[0-9]?"), // 8*(1+10+100): one goroutine
	} {
		q, err := h.Querier(math.MinInt64, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		ss := q.Select(context.Background(), false, nil, sel)
		for ss.Next() {
		}
		var sp *snapshotPanic
		if err := ss.Err(); !errors.As(err, &sp) || !strings.Contains(err.Error(), "injected snapshot bug") {
			t.Fatalf("%s: query over a group whose snapshot panics: %v", sel, err)
		}
		q.Close()
	}
	snapshotGroupHook = nil
	if s := logs.String(); !strings.Contains(s, "head snapshot panicked") || !strings.Contains(s, "TestSnapshotPanic") {
		t.Errorf("panic not logged with its stack:\n%s", s)
	}
	done := make(chan struct{})
	go func() { appendAll(2000); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a write to the group whose snapshot panicked is still blocked after 10s: the group stayed locked")
	}
	got := readAll(t, h, math.MinInt64, math.MaxInt64)
	if n := len(got); n != instances*members {
		t.Fatalf("%d series after the panics, want %d", n, instances*members)
	}
}

// BenchmarkHeadSelect snapshots 100 groups of 50 series of 120 samples.
func BenchmarkHeadSelect(b *testing.B) {
	h := openHead(b, b.TempDir(), nil)
	defer h.Close()
	for s := range 120 {
		for i := range 100 {
			batch := &Batch{}
			for m := range 50 {
				batch.Series = append(batch.Series, BatchSeries{Labels: series("m", "job", "j", "instance", fmt.Sprint("i", i), "m", fmt.Sprint(m)),
					Samples: []Sample{{T: int64(s) * 15000, V: float64(m)}}})
			}
			if _, err := h.AppendBatch(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
		}
	}
	q, err := h.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		b.Fatal(err)
	}
	sel := labels.MustNewMatcher(labels.MatchEqual, "__name__", "m")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ss := q.Select(context.Background(), false, nil, sel)
		for ss.Next() {
		}
	}
}

package tsdb

import (
	"context"
	"testing"
	"time"

	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// TestRunSchedule: Run flushes at its first tick and then only every
// FlushInterval, seals on every tick, and returns when its context ends.
func TestRunSchedule(t *testing.T) {
	const hour = int64(3600000)
	now := int64(1 << 50)
	now -= now % hour
	db := openDB(t, t.TempDir(), func(o *DBOptions) {
		o.Head.BlockRange = time.Hour
		o.Head.Now = func() int64 { return now + 10*hour }
		o.SealInterval = 10 * time.Millisecond
		o.FlushInterval = time.Hour
	})
	defer db.Close()
	appendRange := func(from, to int64) {
		t.Helper()
		for ts := from; ts < to; ts += 60000 {
			b := &head.Batch{Series: []head.BatchSeries{{Labels: series("m", "job", "j", "instance", "i"), Samples: []head.Sample{{T: ts, V: 1}}}}}
			if res, err := db.AppendBatch(context.Background(), b); err != nil || res.Err() != nil {
				t.Fatal(err, res.Err())
			}
		}
	}
	appendRange(now, now+3*hour) // two full ranges to flush
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { db.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for db.head.MinValidTime() < now+2*hour {
		if time.Now().After(deadline) {
			t.Fatalf("head starts at %d after 10 s of Run, want %d: the first tick's flush", db.head.MinValidTime()-now, 2*hour)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// More full ranges: the next flush is an hour away.
	appendRange(now+3*hour, now+6*hour)
	time.Sleep(200 * time.Millisecond) // 20 ticks
	if got := db.head.MinValidTime(); got != now+2*hour {
		t.Fatalf("head starts at %d, want %d: Run flushed before FlushInterval passed", got-now, 2*hour)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

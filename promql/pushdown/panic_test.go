package pushdown

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/teststorage"
)

// panicking serves st, except that the iterator of the series s="13" panics.
type panicking struct{ storage.Queryable }

func (p panicking) Querier(mint, maxt int64) (storage.Querier, error) {
	q, err := p.Queryable.Querier(mint, maxt)
	return panickingQuerier{q}, err
}

type panickingQuerier struct{ storage.Querier }

func (q panickingQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	return panickingSet{q.Querier.Select(ctx, sortSeries, hints, ms...)}
}

type panickingSet struct{ storage.SeriesSet }

func (s panickingSet) At() storage.Series {
	if x := s.SeriesSet.At(); x.Labels().Get("s") != "13" {
		return x
	}
	return panickingSeries{s.SeriesSet.At()}
}

type panickingSeries struct{ storage.Series }

func (panickingSeries) Iterator(chunkenc.Iterator) chunkenc.Iterator { panic("injected storage bug") }

const panicChildEnv = "TANDEM_PUSHDOWN_PANIC_CHILD"

// TestWorkerPanic: a panic in a push-down worker goroutine (here a storage
// series whose iterator panics) fails that query with an internal error,
// logged with the worker's stack, and the engine answers the next query.
// Without the worker's recover the panic ends the process, so the check runs
// in a child process: the test then fails (child crashed) instead of
// taking the test binary down.
func TestWorkerPanic(t *testing.T) {
	if os.Getenv(panicChildEnv) == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestWorkerPanic$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), panicChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestWorkerPanic")) {
			t.Fatalf("child process: %v\n%s", err, out)
		}
		return
	}
	st := teststorage.New(t)
	app := st.Appender(context.Background())
	for s := range 100 {
		ls := labels.FromStrings("__name__", "req_total", "instance", fmt.Sprint(s%5), "s", fmt.Sprint(s))
		for i := range 240 {
			if _, err := app.Append(0, ls, int64(i)*15000, float64(i*s)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	eng := NewEngine(promql.EngineOpts{MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, Options{Workers: 1}) // one worker goroutine: teststorage's series cannot be read concurrently
	query := func(q storage.Queryable) promql.Result {
		qry, err := eng.NewRangeQuery(context.Background(), q, nil, `sum by(instance)(rate(req_total[5m]))`,
			time.UnixMilli(0), time.UnixMilli(3600_000), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer qry.Close()
		return *qry.Exec(context.Background())
	}
	res := query(panicking{st})
	var internal promql.ErrStorage
	if !errors.As(res.Err, &internal) || !strings.Contains(res.Err.Error(), "injected storage bug") {
		t.Fatalf("query over a panicking series: %v; want an internal error naming the panic", res.Err)
	}
	if s := logs.String(); !strings.Contains(s, "panicked") || !strings.Contains(s, "panickingSeries") {
		t.Errorf("panic not logged with its stack:\n%s", s)
	}
	if res := query(st); res.Err != nil {
		t.Fatalf("next query: %v", res.Err)
	}
	if evaluated, _ := eng.Counts(); evaluated < 2 {
		t.Fatalf("the push-down evaluated %d queries: the test did not exercise its workers", evaluated)
	}
}

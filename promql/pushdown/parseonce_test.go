package pushdown

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/teststorage"
)

// countingParser counts the parses of the engine it is given to.
type countingParser struct {
	parser.Parser
	n atomic.Int64
}

func (p *countingParser) ParseExpr(qs string) (parser.Expr, error) {
	p.n.Add(1)
	return p.Parser.ParseExpr(qs)
}

// failingTracker refuses every query before the engine parses it.
type failingTracker struct{}

func (failingTracker) GetMaxConcurrent() int                       { return 1 }
func (failingTracker) Insert(context.Context, string) (int, error) { return 0, errors.New("refused") }
func (failingTracker) Delete(int)                                  {}
func (failingTracker) Close() error                                { return nil }

func parseOnceData(t *testing.T) *teststorage.TestStorage {
	var data []diffSeries
	for i := range 24 {
		b := labels.NewScratchBuilder(4)
		b.Add(labels.MetricName, []string{"g_a", "g_b"}[i%2])
		b.Add("job", []string{"a", "b", "c"}[i%3])
		b.Add("instance", fmt.Sprintf("host-%d", i/6))
		b.Sort()
		s := diffSeries{lset: b.Labels()}
		for ts := diffStart; ts <= diffStart+30*60000; ts += 15000 {
			s.samples = append(s.samples, diffSample{ts, float64(int64(i)*ts%97) / 7})
		}
		data = append(data, s)
	}
	st := teststorage.New(t)
	loadDiffData(t, st, data)
	return st
}

// TestParsedOnce: the engine takes the tree the push-down parsed (and
// planned) instead of parsing the query again, the answers stay the
// Prometheus engine's, queries with the same text running at once (some
// with the push-down disabled) do too, and nothing is left offered after.
func TestParsedOnce(t *testing.T) {
	st := parseOnceData(t)
	plain := newPlainEngine(t, diffEngineOpts())
	opts := diffEngineOpts()
	cp := &countingParser{Parser: parser.NewParser(parser.Options{})}
	opts.Parser = cp
	pd := newPushdownEngine(t, opts, 1) // teststorage's series cannot be read concurrently
	ctx := context.Background()
	rng := queryTime{start: diffStart, end: diffStart + 30*60000, step: 60000}
	instant := queryTime{start: diffStart + 20*60000}
	queries := []struct {
		qs     string
		pushed bool
	}{
		{`sum by(job)(rate(g_a[5m]))`, true},
		{`count(g_b) / sum(g_a)`, true},
		{`g_a{job="a"}`, false},
		{`g_a + on(job, instance) g_b`, false},
	}
	for _, q := range queries {
		for _, qt := range []queryTime{rng, instant} {
			before, _ := pd.Counts()
			parses := cp.n.Load()
			want := execQuery(ctx, plain, st, nil, q.qs, qt)
			got := execQuery(ctx, pd, st, nil, q.qs, qt)
			if d := diffResults(want, got); d != "" {
				t.Errorf("%s, %s: %s", q.qs, qt, d)
			}
			if n := cp.n.Load() - parses; n != 1 {
				t.Errorf("%s, %s: parsed %d times", q.qs, qt, n)
			}
			if after, _ := pd.Counts(); (after > before) != q.pushed {
				t.Errorf("%s, %s: pushed down %v, want %v", q.qs, qt, after > before, q.pushed)
			}
		}
	}

	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 8 {
		wg.Go(func() {
			for i := range 25 {
				q := queries[(g+i)%2]
				c := ctx
				if (g+i)%3 == 0 {
					c = Disable(ctx)
				}
				want := execQuery(ctx, plain, st, nil, q.qs, rng)
				if d := diffResults(want, execQuery(c, pd, st, nil, q.qs, rng)); d != "" {
					errs <- fmt.Sprintf("concurrent %s: %s", q.qs, d)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := len(pd.parser.want); n != 0 {
		t.Errorf("%d texts still offered after every query ended", n)
	}

	// A query the engine refuses before parsing takes its offer back.
	ropts := diffEngineOpts()
	ropts.ActiveQueryTracker = failingTracker{}
	refusing := newPushdownEngine(t, ropts, 1)
	if _, err := refusing.NewRangeQuery(ctx, st, nil, queries[0].qs, time.UnixMilli(rng.start), time.UnixMilli(rng.end), time.Minute); err == nil {
		t.Fatal("the tracker did not refuse the query")
	}
	if n := len(refusing.parser.want); n != 0 {
		t.Errorf("%d texts still offered after a refused query", n)
	}
}

// BenchmarkSmallQuery is a dashboard panel's instant query on a few series,
// where creating the query (parsing, planning) weighs.
func BenchmarkSmallQuery(b *testing.B) {
	var data []diffSeries
	for i := range 8 {
		s := diffSeries{lset: labels.FromStrings(labels.MetricName, "node_cpu_seconds_total", "instance", "host-1", "job", "node", "cpu", fmt.Sprint(i/4), "mode", []string{"idle", "user", "system", "iowait"}[i%4])}
		for ts := diffStart; ts <= diffStart+30*60000; ts += 15000 {
			s.samples = append(s.samples, diffSample{ts, float64(ts-diffStart) / 1000 * float64(i+1)})
		}
		data = append(data, s)
	}
	st := teststorage.New(b)
	loadDiffData(b, st, data)
	pd := newPushdownEngine(b, diffEngineOpts(), 1)
	ctx := context.Background()
	for _, qs := range []string{
		`sum by(instance)(rate(node_cpu_seconds_total{instance="host-1",mode!="idle"}[5m]))`,
		`node_cpu_seconds_total{instance="host-1",mode="user"}`,
	} {
		b.Run(qs[:18], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				q, err := pd.NewInstantQuery(ctx, st, nil, qs, time.UnixMilli(diffStart+20*60000))
				if err != nil {
					b.Fatal(err)
				}
				if res := q.Exec(ctx); res.Err != nil {
					b.Fatal(res.Err)
				}
				q.Close()
			}
		})
	}
}

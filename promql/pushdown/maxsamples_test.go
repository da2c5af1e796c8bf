package pushdown

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/teststorage"
)

// TestMaxSamples: a query over the sample limit fails with the engine's
// error through the push-down as through Prometheus's engine, and a query well
// under it succeeds through both.
func TestMaxSamples(t *testing.T) {
	st := teststorage.New(t)
	app := st.Appender(context.Background())
	for s := 0; s < 50; s++ {
		ls := labels.FromStrings("__name__", "req_total", "instance", fmt.Sprint(s%5), "s", fmt.Sprint(s))
		for i := 0; i < 240; i++ { // 1 h at 15 s
			if _, err := app.Append(0, ls, int64(i)*15000, float64(i*s)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q     string
		limit int
		fail  bool
	}{
		{`sum by(instance)(rate(req_total[5m]))`, 100_000, false},
		{`sum by(instance)(rate(req_total[5m]))`, 1_000, true},
		{`count(req_total)`, 100_000, false},
		{`count(req_total)`, 1_000, true},
	} {
		opts := promql.EngineOpts{MaxSamples: tc.limit, Timeout: time.Minute, LookbackDelta: 5 * time.Minute}
		for name, eng := range map[string]promql.QueryEngine{
			"prometheus": promql.NewEngine(opts),
			"pushdown":   NewEngine(opts, Options{Workers: 2}),
		} {
			qry, err := eng.NewRangeQuery(context.Background(), st, nil, tc.q, time.UnixMilli(0), time.UnixMilli(3600_000), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			res := qry.Exec(context.Background())
			var tooMany promql.ErrTooManySamples
			switch {
			case tc.fail && !errors.As(res.Err, &tooMany):
				t.Errorf("%s: %s with max samples %d: want the too-many-samples error, got %v", name, tc.q, tc.limit, res.Err)
			case !tc.fail && res.Err != nil:
				t.Errorf("%s: %s with max samples %d: %v", name, tc.q, tc.limit, res.Err)
			}
			qry.Close()
		}
	}
}

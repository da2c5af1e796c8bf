package pushdown

import (
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// TestPlan lists which subexpressions are pushed down and which stay with
// the engine.
func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		q         string
		perSeries bool
		want      int    // pushed-down nodes
		rewritten string // the rewritten query, when checked
	}{
		{`sum by(instance)(rate(x[5m]))`, false, 1, `{__tandem_pushdown__="0"}`},
		{`histogram_quantile(0.9, sum by(le)(rate(x_bucket[5m])))`, false, 1, `histogram_quantile(0.9, {__tandem_pushdown__="0"})`},
		{`count by(job)({__name__=~"node_.*"})`, false, 1, ``},
		{`avg(x) / sum without(cpu)(increase(y[1h] offset 5m))`, false, 2, `{__tandem_pushdown__="0"} / {__tandem_pushdown__="1"}`},
		{`topk(3, sum by(a)(x))`, false, 1, `topk(3, {__tandem_pushdown__="0"})`},
		{`rate(x[5m])`, true, 1, `{__tandem_pushdown__="0"}`},
		{`rate(x[5m])`, false, 0, ``},
		{`topk(3, rate(x[5m]))`, true, 1, `topk(3, {__tandem_pushdown__="0"})`},
		// Left to the engine.
		{`quantile(0.9, x)`, true, 0, ``},
		{`sum(x @ 100)`, true, 0, ``},
		{`sum(rate(x[5m] @ end()))`, true, 0, ``},
		{`max_over_time(sum(x)[1h:1m])`, true, 0, ``},
		{`sum by(__name__)(rate(x[5m]))`, false, 0, ``},
		{`sum by(__name__)(rate(x[5m]))`, true, 1, `sum by (__name__) ({__tandem_pushdown__="0"})`},
		{`absent(sum(x))`, true, 0, ``},
		{`absent(rate(x[5m]))`, true, 0, ``},
		{`timestamp(rate(x[5m]))`, true, 0, ``},
		{`histogram_count(sum(x))`, true, 0, ``},
		{`sum(irate(x[5m]))`, true, 0, ``},
		{`sum(rate(x[5m:1m]))`, true, 0, ``},
		{`sum(x)`, true, 1, ``},
	} {
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.q, err)
		}
		before := expr.String()
		out, nodes := plan(expr, tc.perSeries)
		if len(nodes) != tc.want {
			t.Errorf("%s (per series %v): %d nodes pushed down, want %d", tc.q, tc.perSeries, len(nodes), tc.want)
		}
		if tc.rewritten != "" && out.String() != tc.rewritten {
			t.Errorf("%s: rewritten to %s, want %s", tc.q, out, tc.rewritten)
		}
		if expr.String() != before {
			t.Errorf("%s: plan modified the parsed expression", tc.q)
		}
	}
}

// Package pushdown evaluates the most common PromQL subexpressions —
// an aggregation of a selector or of a range function over a selector, such
// as sum by(instance)(rate(x[5m])) — in one pass over the storage, on all
// cores, and hands the result to Prometheus's own engine, which evaluates the
// rest of the query as usual.
//
// The engine is not modified: the Engine type gives it a parser that replaces
// each such subexpression with a selector of synthetic series, and a
// Queryable that answers that selector with the pushed-down result (one
// sample per step, a stale marker where the subexpression has no value).
// The semantics are Prometheus's, function by function: the same windows,
// extrapolation, Kahan summation and annotations (see eval.go).
package pushdown

import (
	"slices"
	"strconv"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/parser/posrange"
)

// markerLabel names the synthetic selector standing for pushed-down node i
// (value strconv.Itoa(i)) in a rewritten expression.
const markerLabel = "__tandem_pushdown__"

// rangeFuncs are the range-vector functions evaluated here; the others stay
// with the engine.
var rangeFuncs = map[string]bool{
	"rate": true, "increase": true, "delta": true,
	"sum_over_time": true, "avg_over_time": true, "count_over_time": true,
	"min_over_time": true, "max_over_time": true, "last_over_time": true,
}

// selectorArgFuncs are the functions whose evaluation looks at whether an
// argument is a selector; their aggregation arguments are left alone.
var selectorArgFuncs = map[string]bool{
	"absent": true, "timestamp": true, "start_timestamp": true, "info": true,
}

// statsFuncs read native histograms through the engine's statistics-only
// iterator, which depends on the whole path: nothing below them is rewritten.
var statsFuncs = map[string]bool{
	"histogram_count": true, "histogram_sum": true, "histogram_avg": true,
}

// aggOps are the aggregations evaluated here.
var aggOps = map[parser.ItemType]bool{
	parser.SUM: true, parser.AVG: true, parser.COUNT: true,
	parser.MIN: true, parser.MAX: true, parser.GROUP: true,
}

// node is one pushed-down subexpression: op by/without(grouping) of either a
// selector (fn == "") or fn(selector[rng]).
type node struct {
	expr     *parser.AggregateExpr // the original subexpression
	op       parser.ItemType
	without  bool
	grouping []string // sorted
	fn       string
	sel      *parser.VectorSelector
	rng      int64 // milliseconds; 0 for a bare selector
	offset   int64 // milliseconds
	argPos   posrange.PositionRange
}

// plan finds the pushable subexpressions of expr, in a deterministic order
// (depth first, left to right), and returns them with a copy of expr in which
// each is replaced by its synthetic selector. It returns nil nodes when there
// is nothing to push down; expr is never modified.
func plan(expr parser.Expr) (parser.Expr, []*node) {
	var nodes []*node
	out := rewrite(expr, &nodes)
	if len(nodes) == 0 {
		return expr, nil
	}
	return out, nodes
}

// rewrite returns e with its pushable subexpressions replaced, appending them
// to nodes. Subqueries are left alone: their inner steps are not the query's.
func rewrite(e parser.Expr, nodes *[]*node) parser.Expr {
	switch e := e.(type) {
	case *parser.AggregateExpr:
		if n := pushable(e); n != nil {
			i := len(*nodes)
			*nodes = append(*nodes, n)
			return &parser.VectorSelector{
				LabelMatchers: []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, markerLabel, strconv.Itoa(i))},
				PosRange:      e.PosRange,
			}
		}
		c := *e
		c.Expr = rewrite(e.Expr, nodes)
		if e.Param != nil {
			c.Param = rewrite(e.Param, nodes)
		}
		return &c
	case *parser.BinaryExpr:
		c := *e
		c.LHS = rewrite(e.LHS, nodes)
		c.RHS = rewrite(e.RHS, nodes)
		return &c
	case *parser.Call:
		if e.Func != nil && statsFuncs[e.Func.Name] {
			return e
		}
		c := *e
		c.Args = make(parser.Expressions, len(e.Args))
		for i, a := range e.Args {
			if _, agg := unparen(a).(*parser.AggregateExpr); agg && e.Func != nil && selectorArgFuncs[e.Func.Name] {
				// The engine treats a selector argument of these differently
				// from an aggregation (absent's labels, for one).
				c.Args[i] = a
				continue
			}
			c.Args[i] = rewrite(a, nodes)
		}
		return &c
	case *parser.ParenExpr:
		c := *e
		c.Expr = rewrite(e.Expr, nodes)
		return &c
	case *parser.UnaryExpr:
		c := *e
		c.Expr = rewrite(e.Expr, nodes)
		return &c
	default:
		// Selectors, literals, subqueries and step-invariant wrappers.
		return e
	}
}

// pushable returns the node for a, or nil if a is not evaluated here.
func pushable(a *parser.AggregateExpr) *node {
	if !aggOps[a.Op] || a.Param != nil {
		return nil
	}
	n := &node{expr: a, op: a.Op, without: a.Without, grouping: slices.Clone(a.Grouping)}
	slices.Sort(n.grouping)
	inner := unparen(a.Expr)
	switch in := inner.(type) {
	case *parser.VectorSelector:
		if !plainSelector(in) {
			return nil
		}
		n.sel = in
		n.argPos = in.PositionRange()
	case *parser.Call:
		if in.Func == nil || !rangeFuncs[in.Func.Name] || len(in.Args) != 1 {
			return nil
		}
		ms, ok := in.Args[0].(*parser.MatrixSelector)
		if !ok {
			return nil
		}
		vs, ok := ms.VectorSelector.(*parser.VectorSelector)
		if !ok || !plainSelector(vs) || ms.RangeExpr != nil || ms.Range <= 0 {
			return nil
		}
		if !a.Without && slices.Contains(a.Grouping, labels.MetricName) {
			// Whether the name is still there depends on delayed name removal.
			return nil
		}
		n.fn = in.Func.Name
		n.sel = vs
		n.rng = ms.Range.Milliseconds()
		n.argPos = ms.PositionRange()
	default:
		return nil
	}
	n.offset = n.sel.OriginalOffset.Milliseconds()
	return n
}

// plainSelector reports whether vs has only what this package evaluates: no
// @ modifier, no anchored or smoothed range, no offset expression left
// unresolved, and no marker of an earlier rewrite.
func plainSelector(vs *parser.VectorSelector) bool {
	if vs.Timestamp != nil || vs.StartOrEnd != 0 || vs.Anchored || vs.Smoothed {
		return false
	}
	if vs.OriginalOffsetExpr != nil {
		return false // resolved by the engine's preprocessing, per query
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == markerLabel {
			return false
		}
	}
	return true
}

func unparen(e parser.Expr) parser.Expr {
	for {
		p, ok := e.(*parser.ParenExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}

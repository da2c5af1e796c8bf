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
	expr      parser.Expr // the original subexpression
	perSeries bool        // fn(selector[rng]) alone: one output series per input series
	op        parser.ItemType
	without   bool
	grouping  []string // sorted
	fn        string
	sel       *parser.VectorSelector
	rng       int64 // milliseconds; 0 for a bare selector
	offset    int64 // milliseconds
	argPos    posrange.PositionRange
}

// plan finds the pushable subexpressions of expr, in a deterministic order
// (depth first, left to right), and returns them with a copy of expr in which
// each is replaced by its synthetic selector. It returns nil nodes when there
// is nothing to push down; expr is never modified.
//
// With perSeries, range functions outside an aggregation are pushed down too
// (one output series per input series); that needs the engine's immediate
// name removal, as their output labels are computed here.
func plan(expr parser.Expr, perSeries bool) (parser.Expr, []*node) {
	var nodes []*node
	out := rewrite(expr, &nodes, perSeries)
	if len(nodes) == 0 {
		return expr, nil
	}
	return out, nodes
}

// rewrite returns e with its pushable subexpressions replaced, appending them
// to nodes. Subqueries are left alone: their inner steps are not the query's.
func rewrite(e parser.Expr, nodes *[]*node, perSeries bool) parser.Expr {
	synthetic := func(n *node, pr posrange.PositionRange) parser.Expr {
		i := len(*nodes)
		*nodes = append(*nodes, n)
		return &parser.VectorSelector{
			LabelMatchers: []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, markerLabel, strconv.Itoa(i))},
			PosRange:      pr,
		}
	}
	switch e := e.(type) {
	case *parser.AggregateExpr:
		if n := pushable(e); n != nil {
			return synthetic(n, e.PosRange)
		}
		c := *e
		c.Expr = rewrite(e.Expr, nodes, perSeries)
		if e.Param != nil {
			c.Param = rewrite(e.Param, nodes, perSeries)
		}
		return &c
	case *parser.BinaryExpr:
		c := *e
		c.LHS = rewrite(e.LHS, nodes, perSeries)
		c.RHS = rewrite(e.RHS, nodes, perSeries)
		return &c
	case *parser.Call:
		if e.Func != nil && statsFuncs[e.Func.Name] {
			return e
		}
		if perSeries {
			if n := pushableCall(e); n != nil {
				n.perSeries = true
				return synthetic(n, e.PosRange)
			}
		}
		c := *e
		c.Args = make(parser.Expressions, len(e.Args))
		for i, a := range e.Args {
			if e.Func != nil && selectorArgFuncs[e.Func.Name] {
				// The engine treats a selector argument of these differently
				// from other expressions (absent's labels, for one).
				switch unparen(a).(type) {
				case *parser.AggregateExpr, *parser.Call:
					c.Args[i] = a
					continue
				}
			}
			c.Args[i] = rewrite(a, nodes, perSeries)
		}
		return &c
	case *parser.ParenExpr:
		c := *e
		c.Expr = rewrite(e.Expr, nodes, perSeries)
		return &c
	case *parser.UnaryExpr:
		c := *e
		c.Expr = rewrite(e.Expr, nodes, perSeries)
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
	inner := unparen(a.Expr)
	switch in := inner.(type) {
	case *parser.VectorSelector:
		if !plainSelector(in) {
			return nil
		}
		n := &node{sel: in, argPos: in.PositionRange(), offset: in.OriginalOffset.Milliseconds()}
		return n.aggregated(a)
	case *parser.Call:
		if !a.Without && slices.Contains(a.Grouping, labels.MetricName) {
			// Whether the name is still there depends on delayed name removal.
			return nil
		}
		if n := pushableCall(in); n != nil {
			return n.aggregated(a)
		}
	}
	return nil
}

// aggregated sets n up as aggregation a of its input.
func (n *node) aggregated(a *parser.AggregateExpr) *node {
	n.expr, n.op, n.without = a, a.Op, a.Without
	n.grouping = slices.Clone(a.Grouping)
	slices.Sort(n.grouping)
	return n
}

// pushableCall returns the node of range function call c over a plain
// selector, or nil.
func pushableCall(c *parser.Call) *node {
	if c.Func == nil || !rangeFuncs[c.Func.Name] || len(c.Args) != 1 {
		return nil
	}
	ms, ok := c.Args[0].(*parser.MatrixSelector)
	if !ok {
		return nil
	}
	vs, ok := ms.VectorSelector.(*parser.VectorSelector)
	if !ok || !plainSelector(vs) || ms.RangeExpr != nil || ms.Range <= 0 {
		return nil
	}
	return &node{
		expr: c, fn: c.Func.Name, sel: vs,
		rng:    ms.Range.Milliseconds(),
		offset: vs.OriginalOffset.Milliseconds(),
		argPos: ms.PositionRange(),
	}
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

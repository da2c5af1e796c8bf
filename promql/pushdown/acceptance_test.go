package pushdown

import (
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
)

// testEngine is an Engine with the options of promqltest's test engine.
func testEngine(t testing.TB, workers int) *Engine {
	e := NewEngine(promql.EngineOpts{
		MaxSamples:               promqltest.DefaultMaxSamplesPerQuery,
		Timeout:                  100 * time.Second,
		NoStepSubqueryIntervalFn: func(int64) int64 { return time.Minute.Milliseconds() },
		EnableAtModifier:         true,
		EnableNegativeOffset:     true,
		EnableDelayedNameRemoval: true,
		UseStartTimestamps:       true,
		Parser:                   parser.NewParser(promqltest.TestParserOpts),
	}, Options{Workers: workers})
	t.Cleanup(func() { e.Prometheus().Close(); e.fallback.Close() })
	return e
}

// TestAcceptance runs Prometheus's PromQL acceptance suite through the
// push-down engine, on Prometheus's own storage: every pushed-down
// subexpression must give the engine's answer and annotations.
func TestAcceptance(t *testing.T) {
	e := testEngine(t, 1)
	promqltest.RunBuiltinTests(t, e)
	evaluated, fallbacks := e.Counts()
	t.Logf("pushed down: %d evaluated here, %d handed back to the engine", evaluated, fallbacks)
	if evaluated < 200 {
		t.Errorf("only %d subexpressions were evaluated by the push-down: the suite no longer exercises it", evaluated)
	}
}

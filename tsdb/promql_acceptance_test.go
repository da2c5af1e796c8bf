package tsdb

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"

	"github.com/tandem-tsdb/tandem/promql/pushdown"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// newTestDB opens an empty DB: the acceptance suite's data stays in its head.
func newTestDB(tb testing.TB) *DB {
	tb.Helper()
	opts := head.DefaultOptions()
	opts.WALSyncInterval = 0
	db, err := OpenDB(tb.TempDir(), DBOptions{Head: opts})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// knownFailures lists the sections of Prometheus's PromQL acceptance suite
// that tandem does not pass yet, with the reason. A listed section that starts
// passing fails the test, so this list can only shrink.
// It is empty: every section passes.
var knownFailures = map[string]string{}

// promqlTestdata finds the acceptance suite's files in the module cache.
func promqlTestdata(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/prometheus/prometheus").Output()
	if err != nil {
		t.Fatalf("locate the prometheus module: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "promql", "promqltest", "testdata")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("acceptance suite not found: %v", err)
	}
	return dir
}

// splitSections cuts a test file at its `clear` commands; each section runs on a fresh head.
func splitSections(content string) (names []int, sections []string) {
	lines := strings.Split(content, "\n")
	start := 0
	flush := func(end int) {
		body := strings.Join(lines[start:end], "\n")
		if strings.TrimSpace(body) != "" {
			// Pad with blank lines so error messages keep the file's line numbers.
			names = append(names, start+1)
			sections = append(sections, strings.Repeat("\n", start)+body)
		}
	}
	for i, l := range lines {
		if strings.TrimSpace(l) == "clear" {
			flush(i)
			start = i + 1
		}
	}
	flush(len(lines))
	return names, sections
}

// TestPromQLAcceptance runs Prometheus's PromQL test suite (promqltest's
// builtin files) against tandem's DB (data in the head), section by section.
func TestPromQLAcceptance(t *testing.T) {
	runAcceptance(t, nil, func(tb testing.TB) storage.Storage { return newTestDB(tb) }, knownFailures)
}

// pushdownEngine is tandem's query engine (package pushdown) with the
// options of promqltest's test engine and two workers per subexpression, so
// the concurrent iteration of tandem's series is exercised.
func pushdownEngine(t *testing.T) *pushdown.Engine {
	e := pushdown.NewEngine(promql.EngineOpts{
		MaxSamples:               promqltest.DefaultMaxSamplesPerQuery,
		Timeout:                  100 * time.Second,
		NoStepSubqueryIntervalFn: func(int64) int64 { return time.Minute.Milliseconds() },
		EnableAtModifier:         true,
		EnableNegativeOffset:     true,
		EnableDelayedNameRemoval: true,
		UseStartTimestamps:       true,
		Parser:                   parser.NewParser(promqltest.TestParserOpts),
	}, pushdown.Options{Workers: 2})
	t.Cleanup(func() {
		evaluated, fallbacks := e.Counts()
		t.Logf("push-down: %d subexpressions evaluated, %d handed back to the engine", evaluated, fallbacks)
		if evaluated < 150 {
			t.Errorf("only %d subexpressions were pushed down: the suite no longer exercises the push-down", evaluated)
		}
	})
	return e
}

// TestPromQLAcceptancePushdown runs the suite through tandem's query engine
// (with push-down) over tandem's head.
func TestPromQLAcceptancePushdown(t *testing.T) {
	runAcceptance(t, pushdownEngine(t), func(tb testing.TB) storage.Storage { return newTestDB(tb) }, knownFailures)
}

// runAcceptance runs the suite with engine (nil: Prometheus's test engine).
func runAcceptance(t *testing.T, engine promql.QueryEngine, newStorage func(testing.TB) storage.Storage, knownFailures map[string]string) {
	dir := promqlTestdata(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.test"))
	if err != nil || len(files) < 20 {
		t.Fatalf("expected the builtin test files in %s, found %d (%v)", dir, len(files), err)
	}
	if engine == nil {
		engine = promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
	}
	var passed, failedKnown int
	var knownRuns []string
	var evals int
	seen := map[string]bool{}
	var unexpected []string
	for _, f := range files {
		content, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		starts, sections := splitSections(string(content))
		for i, sec := range sections {
			name := fmt.Sprintf("%s:%d", filepath.Base(f), starts[i])
			seen[name] = true
			n := strings.Count(sec, "\neval")
			_, known := knownFailures[name]
			if known && os.Getenv(envKnownChild) == "" {
				knownRuns = append(knownRuns, name)
				failedKnown++
				continue
			}
			if !known && os.Getenv(envKnownChild) != "" {
				continue
			}
			ok := t.Run(name, func(t *testing.T) {
				promqltest.RunTestWithStorage(t, sec, engine, newStorage)
			})
			switch {
			case known:
				failedKnown++
			case ok:
				passed++
				evals += n
			default:
				unexpected = append(unexpected, name)
			}
		}
	}
	for name := range knownFailures {
		if !seen[name] {
			t.Errorf("known failure %s no longer exists in the suite: remove it", name)
		}
	}
	if len(knownRuns) > 0 {
		checkKnownFailures(t, knownRuns, knownFailures)
	}
	sort.Strings(unexpected)
	t.Logf("acceptance suite: %d sections passed (%d evals), %d known failures, %d unexpected failures %v",
		passed, evals, failedKnown, len(unexpected), unexpected)
}

// envKnownChild, when set, makes runAcceptance run only the known failures,
// each as a real subtest: checkKnownFailures runs the test binary so
// (promqltest needs a *testing.T, so an expected failure cannot be observed
// in the process that reports it).
const envKnownChild = "TANDEM_PROMQL_KNOWN_CHILD"

// checkKnownFailures runs the current test again in a child process with
// only the known failures and fails for each of them that passes there: a
// listed section that starts passing must leave the list.
func checkKnownFailures(t *testing.T, names []string, knownFailures map[string]string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envKnownChild+"=1")
	out, _ := cmd.Output() // the child fails: its sections are expected to
	result := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		for _, verdict := range []string{"PASS", "FAIL"} {
			if rest, ok := strings.CutPrefix(line, "--- "+verdict+": "+t.Name()+"/"); ok {
				result[strings.Fields(rest)[0]] = verdict
			}
		}
	}
	for _, name := range names {
		switch result[name] {
		case "FAIL":
		case "PASS":
			t.Errorf("known failure %s (%s) now passes: remove it from the list", name, knownFailures[name])
		default:
			t.Errorf("known failure %s did not run in the child process", name)
		}
	}
}

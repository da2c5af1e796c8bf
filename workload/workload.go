// Package workload generates node_exporter-like remote-write traffic, modelled
// on real node_exporter scrapes, and sends it the way Prometheus' queue
// manager does: sharded by series, batched, with retries.
package workload

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

// DefaultDataDir is where the real node_exporter scrapes live in this
// workplace: shared/data/node_exporter beside the repository.
const DefaultDataDir = "/work/shared/data/node_exporter"

// DataDirEnv names an environment variable that overrides the scrape directory.
const DataDirEnv = "TANDEM_NODE_EXPORTER_DIR"

// FindDataDir locates the real node_exporter scrapes: $TANDEM_NODE_EXPORTER_DIR,
// else shared/data/node_exporter beside the repository holding the working
// directory (found by walking up to go.mod), else DefaultDataDir.
func FindDataDir() (string, error) {
	if d := os.Getenv(DataDirEnv); d != "" {
		return d, nil
	}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				cand := filepath.Join(filepath.Dir(dir), "shared", "data", "node_exporter")
				if _, err := os.Stat(cand); err == nil {
					return cand, nil
				}
				break
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	if _, err := os.Stat(DefaultDataDir); err != nil {
		return "", fmt.Errorf("node_exporter scrapes not found beside the repository nor in %s (set %s): %w", DefaultDataDir, DataDirEnv, err)
	}
	return DefaultDataDir, nil
}

// Behaviour is how a series' value evolves from one scrape to the next.
type Behaviour int

// Series behaviours.
const (
	Constant Behaviour = iota // never changes
	Gauge                     // varies around the real values
	Counter                   // increases at a noisy rate
)

// Metadata is the type, help and unit of one metric family.
type Metadata struct {
	Type model.MetricType
	Help string
	Unit string
}

// Template is one series of the real scrapes: its labels (without job and
// instance), its metadata and the statistics its generated values follow.
type Template struct {
	Labels    labels.Labels
	Family    string
	Meta      Metadata
	Behaviour Behaviour
	First     float64 // value in the first real scrape
	Mean      float64 // mean of the real values (gauges)
	Spread    float64 // standard deviation of the real values (gauges)
	Rate      float64 // mean increase per second (counters)
	RateSD    float64 // standard deviation of the per-interval rate (counters)
	Integer   bool    // all real values are integers
	// Quantum is the step the real values move in: 0.01 for decimals, for
	// integers the greatest common divisor of their changes (4096 for
	// memory in pages, 512 for disk bytes in sectors, 1 for most).
	Quantum float64
	// histogram describes a synthetic classic histogram series: the bucket
	// upper bound (NaN for _sum and _count); see histogramTemplates.
	histKind int
	le       float64
}

const (
	histNone = iota
	histBucket
	histSum
	histCount
)

// Sample is one series' value in a scrape. Ref is the series' global
// identity, stable across scrapes (it is what senders shard on).
type Sample struct {
	Ref    uint64
	Labels labels.Labels
	Meta   *Metadata
	V      float64
	H      *histogram.Histogram // a native histogram sample instead of V, when set
}

// Scrape is one scrape of one target: every sample shares timestamp T (ms).
type Scrape struct {
	Target   int
	Instance string
	T        int64
	Samples  []Sample
}

// Options configures Generate.
type Options struct {
	Targets       int           // number of targets (instance host-N:9100); default 10
	Scrapes       int           // scrapes per target; default 40
	Interval      time.Duration // scrape interval; default 15s
	Start         time.Time     // time of the first scrape; default now - Scrapes*Interval
	Seed          uint64        // random seed: equal options give equal output
	JitterTargets int           // the last JitterTargets targets get timestamp jitter
	Jitter        time.Duration // largest target-wide offset of a jittered scrape; default 2s when JitterTargets > 0
	Histogram     bool          // add a synthetic classic histogram (the real scrapes have none)
	Templates     []Template    // series per target; default LoadTemplates(DefaultDataDir)
}

func (o *Options) setDefaults() error {
	if o.Targets <= 0 {
		o.Targets = 10
	}
	if o.Scrapes <= 0 {
		o.Scrapes = 40
	}
	if o.Interval <= 0 {
		o.Interval = 15 * time.Second
	}
	if o.Start.IsZero() {
		o.Start = time.Now().Add(-time.Duration(o.Scrapes) * o.Interval).Truncate(time.Second)
	}
	if o.JitterTargets > 0 && o.Jitter <= 0 {
		o.Jitter = 2 * time.Second
	}
	if o.Templates == nil {
		dir, err := FindDataDir()
		if err != nil {
			return err
		}
		ts, err := LoadTemplates(dir)
		if err != nil {
			return err
		}
		o.Templates = ts
	}
	if o.Histogram && !hasHistogram(o.Templates) {
		o.Templates = append(o.Templates, histogramTemplates()...)
	}
	return nil
}

func hasHistogram(ts []Template) bool {
	for _, t := range ts {
		if t.histKind != histNone {
			return true
		}
	}
	return false
}

// Generate returns Scrapes*Targets scrapes ordered by timestamp (then target),
// deterministic for a given Options (with Start and Seed set). Labels of a
// series are shared by all of its samples.
func Generate(opts Options) ([]Scrape, error) {
	g, err := NewGenerator(opts)
	if err != nil {
		return nil, err
	}
	out := make([]Scrape, 0, g.opts.Targets*g.opts.Scrapes)
	for {
		round := g.Next()
		if round == nil {
			break
		}
		out = append(out, round...)
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].T != out[b].T {
			return out[a].T < out[b].T
		}
		return out[a].Target < out[b].Target
	})
	return out, nil
}

// Generator produces the scrapes of Generate one round (one scrape of every
// target) at a time, so that large workloads need not be held in memory.
type Generator struct {
	opts    Options
	k       int
	start   int64
	iv      int64
	targets []*genTarget
	metas   []*Metadata
}

type genTarget struct {
	inst   string
	lsets  []labels.Labels
	st     *targetState
	rng    *rand.Rand
	jitter bool
}

// NewGenerator returns a Generator for opts (defaults as for Generate).
func NewGenerator(opts Options) (*Generator, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	n := len(opts.Templates)
	g := &Generator{opts: opts, start: opts.Start.UnixMilli(), iv: opts.Interval.Milliseconds(), metas: make([]*Metadata, n)}
	for i := range opts.Templates {
		g.metas[i] = &opts.Templates[i].Meta
	}
	for tgt := 0; tgt < opts.Targets; tgt++ {
		rng := rand.New(rand.NewPCG(opts.Seed, uint64(tgt)+1))
		inst := fmt.Sprintf("host-%d:9100", tgt)
		lsets := make([]labels.Labels, n)
		for i, tm := range opts.Templates {
			b := labels.NewBuilder(tm.Labels)
			b.Set("job", "node")
			b.Set("instance", inst)
			lsets[i] = b.Labels()
		}
		g.targets = append(g.targets, &genTarget{
			inst: inst, lsets: lsets, st: newTargetState(opts.Templates, rng), rng: rng,
			jitter: tgt >= opts.Targets-opts.JitterTargets,
		})
	}
	return g, nil
}

// SeriesPerTarget is the number of series each target exposes.
func (g *Generator) SeriesPerTarget() int { return len(g.opts.Templates) }

// Options returns the generator's options with defaults applied.
func (g *Generator) Options() Options { return g.opts }

// Next returns the next round: one scrape per target, ordered by timestamp
// then target; nil after the last round.
func (g *Generator) Next() []Scrape {
	if g.k >= g.opts.Scrapes {
		return nil
	}
	k := g.k
	g.k++
	n := len(g.opts.Templates)
	out := make([]Scrape, 0, len(g.targets))
	for tgt, gt := range g.targets {
		t := g.start + int64(k)*g.iv
		if gt.jitter {
			j := g.opts.Jitter.Milliseconds()
			t += gt.rng.Int64N(2*j+1) - j
		}
		vals := gt.st.next(g.opts.Interval.Seconds(), k == 0)
		sc := Scrape{Target: tgt, Instance: gt.inst, T: t, Samples: make([]Sample, n)}
		for i := range vals {
			sc.Samples[i] = Sample{Ref: uint64(tgt*n + i), Labels: gt.lsets[i], Meta: g.metas[i], V: vals[i]}
		}
		out = append(out, sc)
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].T < out[b].T })
	return out
}

// targetState carries one target's current values between scrapes.
type targetState struct {
	tms   []Template
	rng   *rand.Rand
	scale []float64 // per-target factor on counter rates
	cur   []float64
	// histogram state: observations per bucket, sum.
	hBuckets []int // indices of bucket templates, by ascending le
	hSum     int
	hCount   int
}

func newTargetState(tms []Template, rng *rand.Rand) *targetState {
	s := &targetState{tms: tms, rng: rng, scale: make([]float64, len(tms)), cur: make([]float64, len(tms)), hSum: -1, hCount: -1}
	for i, tm := range tms {
		s.scale[i] = 0.5 + rng.Float64()
		s.cur[i] = tm.First
		switch tm.histKind {
		case histBucket:
			s.hBuckets = append(s.hBuckets, i)
		case histSum:
			s.hSum = i
		case histCount:
			s.hCount = i
		}
	}
	sort.Slice(s.hBuckets, func(a, b int) bool { return tms[s.hBuckets[a]].le < tms[s.hBuckets[b]].le })
	return s
}

// next returns the values of the next scrape, dt seconds after the previous one.
func (s *targetState) next(dt float64, first bool) []float64 {
	out := make([]float64, len(s.tms))
	for i, tm := range s.tms {
		if tm.histKind != histNone {
			continue
		}
		switch tm.Behaviour {
		case Constant:
			s.cur[i] = tm.First
		case Gauge:
			v := tm.Mean + s.rng.NormFloat64()*math.Max(tm.Spread, math.Abs(tm.Mean)*0.01)
			if tm.Mean >= 0 && v < 0 {
				v = 0
			}
			if tm.Integer {
				// A whole number of quanta away from the real first value,
				// and not below zero when the real values are not.
				q := tm.quantum()
				v = tm.First + math.Round((v-tm.First)/q)*q
				if tm.Mean >= 0 && v < 0 {
					v = tm.First - math.Floor(tm.First/q)*q
				}
			} else {
				v = math.Round(v*100) / 100
			}
			s.cur[i] = v
		case Counter:
			if !first {
				r := s.scale[i] * (tm.Rate + s.rng.NormFloat64()*tm.RateSD)
				inc := math.Max(0, r*dt)
				v := s.cur[i] + inc
				if tm.Integer {
					v = s.cur[i] + math.Round(inc/tm.quantum())*tm.quantum()
				} else {
					v = math.Round(v*100) / 100
				}
				s.cur[i] = math.Max(s.cur[i], v)
			}
		}
		out[i] = s.cur[i]
	}
	if len(s.hBuckets) > 0 {
		s.observe(dt, first)
		for _, i := range s.hBuckets {
			out[i] = s.cur[i]
		}
		if s.hSum >= 0 {
			out[s.hSum] = s.cur[s.hSum]
		}
		if s.hCount >= 0 {
			out[s.hCount] = s.cur[s.hCount]
		}
	}
	return out
}

// observe adds a scrape interval's worth of log-normal request durations to
// the synthetic histogram, keeping buckets cumulative and _count == +Inf.
func (s *targetState) observe(dt float64, first bool) {
	if first {
		return // keep the templates' starting values
	}
	n := int(math.Max(0, 0.5*dt+s.rng.NormFloat64()*1.5)) // ~0.5 requests/s
	for range n {
		d := math.Exp(math.Log(0.02) + 1.2*s.rng.NormFloat64())
		for _, i := range s.hBuckets {
			if d <= s.tms[i].le {
				s.cur[i]++
			}
		}
		if s.hCount >= 0 {
			s.cur[s.hCount]++
		}
		if s.hSum >= 0 {
			s.cur[s.hSum] = math.Round((s.cur[s.hSum]+d)*1e6) / 1e6
		}
	}
}

// histogramTemplates returns a synthetic classic histogram modelled on
// promhttp's request duration histogram, starting empty.
func histogramTemplates() []Template {
	const name = "promhttp_metric_handler_request_duration_seconds"
	meta := Metadata{Type: model.MetricTypeHistogram, Help: "Histogram of latencies for HTTP requests to /metrics.", Unit: "seconds"}
	bounds := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, math.Inf(1)}
	var out []Template
	for _, le := range bounds {
		out = append(out, Template{
			Labels: labels.FromStrings("__name__", name+"_bucket", "handler", "/metrics", "le", formatLE(le)),
			Family: name, Meta: meta, Behaviour: Counter, Integer: true, histKind: histBucket, le: le,
		})
	}
	out = append(out,
		Template{Labels: labels.FromStrings("__name__", name+"_sum", "handler", "/metrics"), Family: name, Meta: meta, Behaviour: Counter, histKind: histSum, le: math.NaN()},
		Template{Labels: labels.FromStrings("__name__", name+"_count", "handler", "/metrics"), Family: name, Meta: meta, Behaviour: Counter, Integer: true, histKind: histCount, le: math.NaN()},
	)
	return out
}

func formatLE(le float64) string {
	if math.IsInf(le, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(le, 'g', -1, 64)
}

// LoadTemplates reads every *.prom file in dir (Prometheus text format, file
// names ending in -<scrape time ms>.prom) and derives one Template per series.
func LoadTemplates(dir string) ([]Template, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.prom"))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	if len(files) < 2 {
		return nil, fmt.Errorf("need at least 2 scrapes in %s, found %d", dir, len(files))
	}
	sort.Strings(files)
	type hist struct {
		lset labels.Labels
		vals []float64
		ts   []float64 // seconds
	}
	series := map[string]*hist{}
	var order []string
	metas := map[string]Metadata{}
	for _, f := range files {
		ts, err := scrapeTime(f)
		if err != nil {
			return nil, err
		}
		err = parseFile(f, metas, func(ls labels.Labels, v float64) {
			k := ls.String()
			h, ok := series[k]
			if !ok {
				h = &hist{lset: ls}
				series[k] = h
				order = append(order, k)
			}
			h.vals = append(h.vals, v)
			h.ts = append(h.ts, float64(ts)/1000)
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]Template, 0, len(order))
	for _, k := range order {
		h := series[k]
		name := h.lset.Get(labels.MetricName)
		fam, md := family(name, metas)
		tm := Template{Labels: h.lset, Family: fam, Meta: md, First: h.vals[0], Integer: true}
		var sum, mono = 0.0, true
		for i, v := range h.vals {
			sum += v
			if v != math.Trunc(v) {
				tm.Integer = false
			}
			if i > 0 && v < h.vals[i-1] {
				mono = false
			}
		}
		tm.Quantum = 0.01
		if tm.Integer {
			tm.Quantum = integerQuantum(h.vals)
		}
		tm.Mean = sum / float64(len(h.vals))
		var sq float64
		for _, v := range h.vals {
			sq += (v - tm.Mean) * (v - tm.Mean)
		}
		tm.Spread = math.Sqrt(sq / float64(len(h.vals)))
		last := len(h.vals) - 1
		counterish := md.Type == model.MetricTypeCounter || strings.HasSuffix(name, "_total") ||
			(md.Type == model.MetricTypeUnknown && mono) ||
			(md.Type == model.MetricTypeSummary && !h.lset.Has("quantile"))
		switch {
		case tm.Spread == 0 || last == 0:
			tm.Behaviour = Constant
		case counterish && mono:
			tm.Behaviour = Counter
			tm.Rate = (h.vals[last] - h.vals[0]) / (h.ts[last] - h.ts[0])
			var sq float64
			for i := 1; i <= last; i++ {
				r := (h.vals[i]-h.vals[i-1])/(h.ts[i]-h.ts[i-1]) - tm.Rate
				sq += r * r
			}
			tm.RateSD = math.Sqrt(sq / float64(last))
		default:
			tm.Behaviour = Gauge
		}
		out = append(out, tm)
	}
	return out, nil
}

// quantum is Quantum, 1 (integers) or 0.01 when not set.
func (tm *Template) quantum() float64 {
	switch {
	case tm.Quantum > 0:
		return tm.Quantum
	case tm.Integer:
		return 1
	}
	return 0.01
}

// integerQuantum returns the greatest common divisor of the changes between
// consecutive values (integers), 1 when they do not change.
func integerQuantum(vals []float64) float64 {
	var g uint64
	for i := 1; i < len(vals); i++ {
		d := math.Abs(vals[i] - vals[i-1])
		if d >= 1<<53 {
			return 1
		}
		a, b := g, uint64(d)
		for b != 0 {
			a, b = b, a%b
		}
		g = a
	}
	return float64(max(g, 1))
}

// scrapeTime extracts the scrape time (ms) from a file name like scrape-01-1796030257046.prom.
func scrapeTime(path string) (int64, error) {
	base := strings.TrimSuffix(filepath.Base(path), ".prom")
	ms, err := strconv.ParseInt(base[strings.LastIndexByte(base, '-')+1:], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("scrape time from file name %s: %w", path, err)
	}
	return ms, nil
}

// parseFile calls fn for every float sample in a text-format file and records metadata.
func parseFile(path string, metas map[string]Metadata, fn func(labels.Labels, float64)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read scrape: %w", err)
	}
	p := textparse.NewPromParser(b, labels.NewSymbolTable(), false)
	for {
		e, err := p.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		switch e {
		case textparse.EntryType:
			name, typ := p.Type()
			m := metas[string(name)]
			m.Type = typ
			metas[string(name)] = m
		case textparse.EntryHelp:
			name, help := p.Help()
			m := metas[string(name)]
			m.Help = string(help)
			metas[string(name)] = m
		case textparse.EntrySeries:
			_, _, v := p.Series()
			var ls labels.Labels
			p.Labels(&ls)
			fn(ls, v)
		}
	}
}

// family finds the metadata of a series name, trying summary/histogram suffixes.
func family(name string, metas map[string]Metadata) (string, Metadata) {
	if m, ok := metas[name]; ok {
		return name, m
	}
	for _, suf := range []string{"_bucket", "_sum", "_count", "_total"} {
		if base, ok := strings.CutSuffix(name, suf); ok {
			if m, ok := metas[base]; ok {
				return base, m
			}
		}
	}
	return name, Metadata{Type: model.MetricTypeUnknown}
}

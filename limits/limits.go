// Package limits holds the per-tenant limits of a shared tandem: their
// defaults, the overrides file that sets them per tenant (reloaded while
// tandem runs), and the ingestion-rate buckets.
//
// The overrides file is YAML, in the shape of Mimir's runtime configuration:
//
//	defaults:                # optional: replaces --limits.* flags for all tenants
//	  max_series: 1000000
//	overrides:
//	  team-a:                # tenant ID
//	    max_series: 200000
//	    ingestion_rate: 50000
//
// A tenant's limits are the defaults (tandem's --limits.* flags, with the
// keys of the file's defaults section replaced) with the keys its entry sets
// replaced. Unknown keys and negative values are
// errors; a file that fails to load leaves the limits in effect unchanged.
package limits

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Limits are one tenant's limits; 0 means no limit, except for
// MaxExemplars, where 0 stores no exemplars.
type Limits struct {
	// IngestionRate is the samples (floats and native histograms) per second a tenant may write, averaged over IngestionBurst.
	IngestionRate float64 `yaml:"ingestion_rate" help:"Samples (floats and native histograms) per second a tenant may write; more get 429 (or --limits.rate-limited-status) with Retry-After; 0 = no limit."`
	// IngestionBurst is how many samples beyond the rate a tenant may write at once (0 = one second of IngestionRate).
	IngestionBurst int `yaml:"ingestion_burst" help:"Samples a tenant may write at once beyond --limits.ingestion-rate; 0 = one second of the rate."`
	// MaxSeries bounds the tenant's active series (in its head).
	MaxSeries int `yaml:"max_series" help:"Active series per tenant (in its head); a new series beyond it is refused (400, the rest of the request is written)."`
	// MaxSeriesPerMetric bounds the active series of one metric name.
	MaxSeriesPerMetric int `yaml:"max_series_per_metric" help:"Active series of one metric name per tenant; a new series beyond it is refused (400)."`
	// MaxSeriesPerGroup bounds the members of one group (a scrape target's series).
	MaxSeriesPerGroup int `yaml:"max_series_per_group" help:"Series of one group (a scrape target) per tenant; a new series beyond it is refused (400)."`
	// MaxGroups bounds the tenant's groups.
	MaxGroups int `yaml:"max_groups" help:"Groups per tenant; a series of a new group beyond it is refused (400)."`
	// MaxMetadata bounds the metric names with metadata kept; more metadata is dropped.
	MaxMetadata int `yaml:"max_metadata" help:"Metric names with metadata kept per tenant; more metadata is dropped."`
	// MaxExemplars is the number of exemplars the tenant's head keeps (the
	// newest; older ones leave it). Unlike the other limits, 0 means none.
	MaxExemplars int `yaml:"max_exemplars" help:"Exemplars kept per tenant (the newest, in its head; older ones are dropped, no write is refused); 0 stores none (not: no limit)."`
	// MaxLabelsPerSeries bounds the labels of a series or an exemplar.
	MaxLabelsPerSeries int `yaml:"max_labels_per_series" help:"Most labels a series (or an exemplar) may have; a series with more is refused (400), an exemplar with more is not written."`
	// MaxLabelNameLength bounds a label name's bytes.
	MaxLabelNameLength int `yaml:"max_label_name_length" help:"Longest label name in bytes; a series with a longer one is refused (400)."`
	// MaxLabelValueLength bounds a label value's bytes.
	MaxLabelValueLength int `yaml:"max_label_value_length" help:"Longest label value in bytes; a series with a longer one is refused (400)."`
	// MaxFetchedSeriesPerQuery bounds the series one query (or one series, labels or remote-read request) reads.
	MaxFetchedSeriesPerQuery int `yaml:"max_fetched_series_per_query" help:"Series one query, series, labels or remote-read request may read; more fail the query (422); 0 = no limit."`
	// MaxFetchedChunksPerQuery bounds the chunks one remote-read request streams.
	MaxFetchedChunksPerQuery int `yaml:"max_fetched_chunks_per_query" help:"Chunks one streamed remote-read request of a tenant may read; more end the response with an error; 0 = no limit."`
	// MaxSamplesPerQuery bounds the samples one query loads at once; 0 means --query.max-samples.
	MaxSamplesPerQuery int `yaml:"max_samples_per_query" help:"Samples one query of a tenant may load into memory at once; more fail the query (422); 0 = --query.max-samples."`
	// MaxQueryLength bounds the time range a query spans (its end minus its start, plus its longest range and offset).
	MaxQueryLength model.Duration `yaml:"max_query_length" help:"Longest time range a query may span (end - start plus its longest selector range and offset); longer fail (400); 0 = no limit."`
	// RetentionTime is how long the tenant's blocks are kept (relative to its newest sample); 0 means --storage.retention.time.
	RetentionTime model.Duration `yaml:"retention_time" help:"How long a tenant's blocks are kept (relative to its newest sample); 0 = --storage.retention.time."`
	// MaxQueryConcurrency bounds the tenant's queries running at once; more wait (the server-wide --query.max-concurrency applies too).
	MaxQueryConcurrency int `yaml:"max_query_concurrency" help:"Queries of one tenant run at once (beyond --query.max-concurrency, which bounds all); more wait; 0 = no limit."`
}

// Defaults are the limits of a tenant the overrides file does not name:
// generous, so that no single Prometheus is refused, but finite for what
// can exhaust memory.
func Defaults() Limits {
	return Limits{
		MaxSeries:           5_000_000,
		MaxSeriesPerMetric:  1_000_000,
		MaxSeriesPerGroup:   500_000,
		MaxGroups:           1_000_000,
		MaxMetadata:         100_000,
		MaxExemplars:        100_000, // head.DefaultOptions().MaxExemplars
		MaxLabelsPerSeries:  64,
		MaxLabelNameLength:  1024,
		MaxLabelValueLength: 4096,
	}
}

// Burst is the bucket size of the ingestion rate.
func (l Limits) Burst() float64 {
	if l.IngestionBurst > 0 {
		return float64(l.IngestionBurst)
	}
	return l.IngestionRate
}

// Validate reports negative limits, naming each by its key.
func (l Limits) Validate() error {
	var errs []error
	each(l, func(key string, v reflect.Value) {
		var neg bool
		switch v.Kind() {
		case reflect.Int, reflect.Int64:
			neg = v.Int() < 0
		case reflect.Float64:
			neg = v.Float() < 0 || v.Float() != v.Float()
		}
		if neg {
			errs = append(errs, fmt.Errorf("%s must not be negative", key))
		}
	})
	return errors.Join(errs...)
}

// Map returns the limits by key, their values formatted as in the file.
func (l Limits) Map() map[string]string {
	out := map[string]string{}
	each(l, func(key string, v reflect.Value) {
		switch x := v.Interface().(type) {
		case model.Duration:
			out[key] = x.String()
		default:
			out[key] = fmt.Sprint(x)
		}
	})
	return out
}

// Keys lists the limits' keys in declaration order.
func Keys() []string {
	var out []string
	each(Limits{}, func(key string, _ reflect.Value) { out = append(out, key) })
	return out
}

func each(l Limits, f func(key string, v reflect.Value)) {
	Fields(&l, func(key, _ string, p any) { f(key, reflect.ValueOf(p).Elem()) })
}

// Fields calls f for every limit of l in declaration order: its key in the
// file, its help text, and a pointer to it (*int, *float64 or
// *model.Duration), for defining flags over l.
func Fields(l *Limits, f func(key, help string, p any)) {
	v := reflect.ValueOf(l).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		key, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		f(key, t.Field(i).Tag.Get("help"), v.Field(i).Addr().Interface())
	}
}

// file is the overrides file.
type file struct {
	Defaults  yaml.Node            `yaml:"defaults"`
	Overrides map[string]yaml.Node `yaml:"overrides"`
}

// parse reads an overrides file over defaults (the flags'): its defaults
// section replaces keys of defaults for every tenant, and each tenant's
// limits are those with the keys its entry sets replaced.
func parse(data []byte, defaults Limits) (Limits, map[string]Limits, error) {
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return Limits{}, nil, err
	}
	if f.Defaults.Kind != 0 {
		if err := decodeStrict(&f.Defaults, &defaults); err != nil {
			return Limits{}, nil, fmt.Errorf("defaults: %w", err)
		}
		if err := defaults.Validate(); err != nil {
			return Limits{}, nil, fmt.Errorf("defaults: %w", err)
		}
	}
	out := make(map[string]Limits, len(f.Overrides))
	var errs []error
	for id, node := range f.Overrides {
		l := defaults
		if err := decodeStrict(&node, &l); err != nil {
			errs = append(errs, fmt.Errorf("tenant %q: %w", id, err))
			continue
		}
		if err := l.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("tenant %q: %w", id, err))
			continue
		}
		out[id] = l
	}
	if len(errs) > 0 {
		return Limits{}, nil, errors.Join(errs...)
	}
	return defaults, out, nil
}

// decodeStrict decodes n into l, refusing unknown keys.
func decodeStrict(n *yaml.Node, l *Limits) error {
	if n.Kind != yaml.MappingNode {
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return nil
		}
		return fmt.Errorf("want a mapping of limits (line %d)", n.Line)
	}
	known := map[string]bool{}
	for _, k := range Keys() {
		known[k] = true
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; !known[k.Value] {
			return fmt.Errorf("unknown limit %q (line %d); known: %s", k.Value, k.Line, strings.Join(Keys(), ", "))
		}
	}
	return n.Decode(l)
}

// Retry is how long a refused rate-limited write should wait, at least a second.
func Retry(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

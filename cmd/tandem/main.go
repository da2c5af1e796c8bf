// Command tandem is a Prometheus-compatible remote storage: it accepts
// remote_write (1.0 and 2.0) into a multivariate head backed by a WAL and
// serves the Prometheus HTTP API over it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/oklog/run"
	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	promtsdb "github.com/prometheus/prometheus/tsdb"

	"github.com/tandem-tsdb/tandem/internal/gctune"
	"github.com/tandem-tsdb/tandem/promql/api"
	"github.com/tandem-tsdb/tandem/remote"
	"github.com/tandem-tsdb/tandem/rules"
	"github.com/tandem-tsdb/tandem/tsdb"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// Build information, set with -ldflags "-X main.version=...".
var (
	version   = "0.1.0-dev"
	revision  = "unknown"
	branch    = "main"
	buildDate = "unknown"
)

type config struct {
	listenAddress   string
	storagePath     string
	groupBy         string
	senderLabels    string
	openWindow      time.Duration
	chunkRows       int
	maxFutureSkew   time.Duration
	oooWindow       time.Duration
	lateMaxAge      time.Duration
	maxSampleAge    time.Duration
	haCluster       string
	haReplica       string
	haFailover      time.Duration
	inferStale      int
	walSync         time.Duration
	walSegment      int64
	blockRange      time.Duration
	retentionTime   time.Duration
	retentionSize   int64
	maintInterval   time.Duration
	enableAdmin     bool
	security        securityConfig
	limits          remote.Limits
	tenancy         tenancyConfig
	server          serverTimeouts
	lookback        time.Duration
	queryTimeout    time.Duration
	maxSamples      int
	pushdown        bool
	useST           bool
	experimentalFns bool
	maxQueries      int
	logLevel        string
	logFormat       string
	gogc            int
	gcMinHeadroom   int64
	showVersion     bool
	externalURL     string
	configFile      string

	ruleFiles          stringList
	evalInterval       time.Duration
	ruleQueryOffset    time.Duration
	outageTolerance    time.Duration
	forGracePeriod     time.Duration
	resendDelay        time.Duration
	maxConcurrentEvals int64
	alertmanagers      stringList
	amClient           rules.AlertmanagerClient
	amQueueCapacity    int
}

// stringList is a repeatable string flag.
type stringList []string

// String implements flag.Value.
func (l *stringList) String() string { return strings.Join(*l, ",") }

// Set implements flag.Value.
func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// newFlagSet defines tandem's flags on c, with their defaults. Every flag
// but --config.file and --version can also be set in the configuration file
// (config.go), the --help output is grouped by the flags' first name
// component, and docs/configuration.md is generated from these definitions
// (make docs): a new flag needs no other code.
func newFlagSet(c *config) *flag.FlagSet {
	c.limits = remote.DefaultLimits()
	def := head.DefaultOptions()
	fs := flag.NewFlagSet("tandem", flag.ContinueOnError)
	// main prints the errors and --help (to stdout); Parse prints nothing.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&c.configFile, "config.file", "", "YAML file setting any of the other flags (except --version); keys are the flag names split at dots, e.g. storage: {retention: {time: 15d}}. Flags on the command line override the file.")
	fs.StringVar(&c.listenAddress, "web.listen-address", ":9201", "Address to listen on for the API, remote write and /metrics; :9201 is every interface, 127.0.0.1:9201 this host only. See --web.config.file for TLS and authentication.")
	fs.StringVar(&c.storagePath, "storage.path", "./data", "Data directory (created if missing).")
	fs.StringVar(&c.groupBy, "group.by", strings.Join(def.GroupBy, ","), "Labels whose values identify a group of series sampled together (a scrape target).")
	fs.StringVar(&c.senderLabels, "group.sender-labels", strings.Join(def.SenderLabels, ","), "Labels added to the group key when present, so different senders never share a group.")
	durationVar(fs, &c.openWindow, "head.open-window", def.OpenWindow, "How long behind a group's newest timestamp rows stay open for members arriving in other requests.")
	fs.IntVar(&c.chunkRows, "head.chunk-rows", def.ChunkRows, "Rows per compressed head chunk (at most 65535).")
	durationVar(fs, &c.maxFutureSkew, "storage.max-future-skew", def.MaxFutureSkew, "Reject samples further than this ahead of the wall clock.")
	durationVar(fs, &c.oooWindow, "storage.out-of-order-window", def.OutOfOrderWindow, "Per group, accept samples this far behind the group's newest timestamp in any order; 0 refuses out-of-order samples.")
	durationVar(fs, &c.lateMaxAge, "storage.late-max-age", def.LateMaxAge, "Accept samples for time ranges already flushed to blocks up to this age (written to out-of-order blocks); 0 refuses them as too old.")
	durationVar(fs, &c.maxSampleAge, "storage.max-sample-age", 0, "Reject samples older than this behind the wall clock, blocks or not; 0 means the larger of --storage.late-max-age and --storage.tsdb.block-range.")
	fs.IntVar(&c.inferStale, "storage.infer-staleness-after", 0, "Write a staleness marker for a series missing from this many consecutive rows of its group (for senders without staleness markers); 0 disables.")
	fs.StringVar(&c.haCluster, "ha.cluster-label", "cluster", "Label naming an HA pair's cluster; part of the group key.")
	fs.StringVar(&c.haReplica, "ha.replica-label", def.HAReplicaLabel, "Label telling an HA pair's replicas apart: removed from stored series, one replica per group is kept; empty disables deduplication.")
	durationVar(fs, &c.haFailover, "ha.failover-timeout", def.HAFailoverTimeout, "How long a group's elected HA replica may be silent before the other takes over.")
	durationVar(fs, &c.walSync, "storage.wal.sync-interval", def.WALSyncInterval, "fsync the WAL at this interval (group commit); 0 fsyncs before every acknowledgement.")
	fs.Int64Var(&c.walSegment, "storage.wal.segment-size", def.WALSegmentSize, "WAL segment size in bytes.")
	durationVar(fs, &c.blockRange, "storage.block-range", def.BlockRange, "Time range of a block; the head is flushed into blocks of this range, aligned to multiples of it.")
	durationVar(fs, &c.retentionTime, "storage.retention.time", 15*24*time.Hour, "Delete blocks older than this (relative to the newest sample); 0 keeps everything.")
	fs.Int64Var(&c.retentionSize, "storage.retention.size", 0, "Delete the oldest blocks while blocks take more than this many bytes; 0 = no limit.")
	fs.Int64Var(&c.limits.MaxBodyBytes, "remote-write.max-body-bytes", c.limits.MaxBodyBytes, "Largest accepted remote-write body (compressed); larger requests get 413.")
	fs.Int64Var(&c.limits.MaxDecodedBytes, "remote-write.max-decoded-bytes", c.limits.MaxDecodedBytes, "Largest accepted remote-write body after snappy decoding; larger get 413.")
	addTenancyFlags(fs, &c.tenancy)
	fs.IntVar(&c.limits.MaxSeriesPerRequest, "remote-write.max-series-per-request", c.limits.MaxSeriesPerRequest, "Most series entries (and 1.0 metadata entries) in one request; more get 413 before they are decoded. Prometheus sends at most max_samples_per_send.")
	fs.IntVar(&c.limits.MaxSamplesPerRequest, "remote-write.max-samples-per-request", c.limits.MaxSamplesPerRequest, "Most float samples, native histogram samples and exemplars in one request (what Prometheus's max_samples_per_send counts); more get 413.")
	fs.IntVar(&c.limits.MaxSymbolsPerRequest, "remote-write.max-symbols-per-request", c.limits.MaxSymbolsPerRequest, "Largest symbols table of a 2.0 request; larger get 413.")
	fs.IntVar(&c.limits.MaxBucketsPerHistogram, "remote-write.max-buckets-per-histogram", c.limits.MaxBucketsPerHistogram, "Most spans, buckets and custom bounds of one native histogram; a histogram with more is refused (400) before it is decoded, the rest of the request is written.")
	fs.Int64Var(&c.limits.MaxHistogramBytesPerRequest, "remote-write.max-histogram-bytes-per-request", c.limits.MaxHistogramBytesPerRequest, "Memory the native histograms of one request may be decoded into (184 bytes a histogram plus 8 a span, bucket and custom bound); more get 413.")
	fs.IntVar(&c.limits.MaxConcurrentRequests, "remote-write.max-concurrent-requests", c.limits.MaxConcurrentRequests, "Remote-write requests handled at once; more wait up to --remote-write.max-queue-wait, then get 503 with Retry-After (Prometheus retries them; 50 is its default max_shards).")
	durationVar(fs, &c.limits.MaxQueueWait, "remote-write.max-queue-wait", c.limits.MaxQueueWait, "How long a remote-write request waits for one of --remote-write.max-concurrent-requests before it gets 503 with Retry-After.")
	fs.Int64Var(&c.limits.MaxInflightBytes, "remote-write.max-inflight-bytes", c.limits.MaxInflightBytes, "Snappy-decoded bytes of the remote-write requests handled at once; a request that would exceed them gets 503 with Retry-After (a request alone is always handled).")
	durationVar(fs, &c.server.readHeader, "web.read-header-timeout", defaultReadHeaderTimeout, "Time allowed to read a request's headers; 0 = --web.read-timeout.")
	durationVar(fs, &c.server.read, "web.read-timeout", defaultReadTimeout, "Time allowed to read a whole request, body included (a remote-write body up to --remote-write.max-body-bytes must arrive within it); 0 = none.")
	durationVar(fs, &c.server.idle, "web.idle-timeout", defaultIdleTimeout, "How long an idle keep-alive connection is kept open; 0 = --web.read-timeout.")
	fs.BoolVar(&c.enableAdmin, "web.enable-admin-api", false, "Enable /api/v1/admin/tsdb/* (snapshot).")
	addSecurityFlags(fs, &c.security)
	durationVar(fs, &c.maintInterval, "head.maintenance-interval", 15*time.Second, "How often idle groups are sealed; every fourth time the head is flushed to blocks, blocks are compacted and retention applied.")
	durationVar(fs, &c.lookback, "query.lookback-delta", 5*time.Minute, "PromQL lookback for instant selectors.")
	durationVar(fs, &c.queryTimeout, "query.timeout", 2*time.Minute, "Maximum time a query may take.")
	fs.IntVar(&c.maxSamples, "query.max-samples", 50_000_000, "Maximum samples a query may load into memory.")
	fs.IntVar(&c.maxQueries, "query.max-concurrency", 20, "Maximum queries executed concurrently.")
	fs.BoolVar(&c.useST, "query.use-start-timestamps", false, "Let rate, increase, irate and resets use the samples' start timestamps (remote write 2.0 start_timestamp), as Prometheus's --enable-feature=use-start-timestamps.")
	fs.BoolVar(&c.experimentalFns, "query.experimental-functions", false, "Enable the PromQL functions Prometheus marks experimental (start_timestamp, ...), as its --enable-feature=promql-experimental-functions.")
	fs.BoolVar(&c.pushdown, "query.pushdown", true, "Evaluate aggregations of selectors and of range functions (sum by(x)(rate(m[5m])), ...) in one pass over the storage on all cores, the rest of the query with Prometheus's engine; false leaves every query to Prometheus's engine.")
	fs.StringVar(&c.logLevel, "log.level", "info", "Log level: debug, info, warn, error.")
	fs.IntVar(&c.gogc, "runtime.gogc", 50, "Go garbage collector target percentage (GOGC): lower keeps the heap closer to its live size at some CPU cost; the GOGC environment variable, when set, takes precedence; -1 disables the collector.")
	fs.Int64Var(&c.gcMinHeadroom, "runtime.gc-min-headroom", 16<<20, "Bytes the heap may always grow by between two garbage collections: while the live heap is small the GOGC percentage is raised after each collection to allow this much (a small head otherwise collects every few queries), back to --runtime.gogc once the live heap is large; 16 MiB costs a small server up to 16 MiB of RSS for fewer collections (cheaper series creation, shorter query tails); 0 keeps --runtime.gogc fixed.")
	fs.StringVar(&c.logFormat, "log.format", "text", "Log format: text or json.")
	fs.BoolVar(&c.showVersion, "version", false, "Print the version and exit.")
	fs.StringVar(&c.externalURL, "web.external-url", "", "URL under which tandem is reached, for alerts' generator URLs and rule templates (default http://<hostname>:<port>/).")
	fs.Var(&c.ruleFiles, "rules.file", "Prometheus rule file (path or glob; repeatable). Reloaded on SIGHUP and, with --web.enable-lifecycle, POST /-/reload.")
	durationVar(fs, &c.evalInterval, "rules.evaluation-interval", rules.DefaultEvaluationInterval, "Evaluation interval of rule groups that set none (Prometheus's global evaluation_interval).")
	durationVar(fs, &c.ruleQueryOffset, "rules.query-offset", 0, "Query offset of rule groups that set none (Prometheus's global rule_query_offset), e.g. to wait for late remote-write data.")
	durationVar(fs, &c.outageTolerance, "rules.alert.for-outage-tolerance", rules.DefaultOutageTolerance, "Max time to tolerate an outage for restoring the \"for\" state of alerts.")
	durationVar(fs, &c.forGracePeriod, "rules.alert.for-grace-period", rules.DefaultForGracePeriod, "Minimum duration between an alert and its restored \"for\" state, for alerts with a \"for\" longer than this.")
	durationVar(fs, &c.resendDelay, "rules.alert.resend-delay", rules.DefaultResendDelay, "Minimum time before resending a firing alert to Alertmanager.")
	fs.Int64Var(&c.maxConcurrentEvals, "rules.max-concurrent-evals", 4, "Independent rules evaluated concurrently, over all groups (0 = each group's rules in sequence).")
	fs.Var(&c.alertmanagers, "alertmanager.url", "Alertmanager base URL alerts are sent to (API v2, e.g. http://127.0.0.1:9093; repeatable).")
	durationVar(fs, &c.amClient.Timeout, "alertmanager.timeout", rules.DefaultAlertmanagerTimeout, "Timeout of one send to an Alertmanager.")
	fs.IntVar(&c.amQueueCapacity, "alertmanager.notification-queue-capacity", rules.DefaultQueueCapacity, "Capacity of the queue of pending Alertmanager notifications.")
	fs.StringVar(&c.amClient.BasicAuthUsername, "alertmanager.basic-auth.username", "", "Basic-auth user name for the Alertmanagers.")
	fs.StringVar(&c.amClient.BasicAuthPasswordFile, "alertmanager.basic-auth.password-file", "", "File holding the basic-auth password for the Alertmanagers.")
	fs.StringVar(&c.amClient.BearerTokenFile, "alertmanager.bearer-token-file", "", "File holding a bearer token for the Alertmanagers.")
	fs.StringVar(&c.amClient.TLSCAFile, "alertmanager.tls.ca-file", "", "CA certificate to verify the Alertmanagers' certificates.")
	fs.StringVar(&c.amClient.TLSCertFile, "alertmanager.tls.cert-file", "", "Client certificate for the Alertmanagers.")
	fs.StringVar(&c.amClient.TLSKeyFile, "alertmanager.tls.key-file", "", "Client key for the Alertmanagers.")
	fs.StringVar(&c.amClient.TLSServerName, "alertmanager.tls.server-name", "", "Server name expected in the Alertmanagers' certificates.")
	fs.BoolVar(&c.amClient.TLSInsecureSkipVerify, "alertmanager.tls.insecure-skip-verify", false, "Do not verify the Alertmanagers' certificates.")
	return fs
}

// parseFlags parses the command line and then the configuration file of
// --config.file, if any, for the flags not given on the command line.
func parseFlags(args []string) (*config, error) {
	c := &config{}
	fs := newFlagSet(c)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	var fromFile map[string]bool
	if c.configFile != "" && !c.showVersion {
		var err error
		if fromFile, err = loadConfigFile(fs, newFlagSet(&config{}), c.configFile); err != nil {
			return nil, err
		}
	}
	if c.showVersion {
		return c, nil
	}
	if err := validateConfig(c, fromFile); err != nil {
		return nil, err
	}
	return c, nil
}

// externalURL returns --web.external-url, defaulting like Prometheus to
// http://<hostname>:<port>/ of the listen address.
func externalURL(raw, listenAddress string) (*url.URL, error) {
	if raw == "" {
		hostname, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("--web.external-url: get hostname: %w", err)
		}
		_, port, err := net.SplitHostPort(listenAddress)
		if err != nil {
			return nil, fmt.Errorf("--web.external-url: %w", err)
		}
		raw = fmt.Sprintf("http://%s/", net.JoinHostPort(hostname, port))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--web.external-url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("--web.external-url %q: scheme must be http or https", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return u, nil
}

// rulesFlags are the rule settings reported by /api/v1/status/flags.
func rulesFlags(c *config, ext *url.URL) map[string]string {
	return map[string]string{
		"web.external-url":                         ext.String(),
		"rules.file":                               c.ruleFiles.String(),
		"rules.evaluation-interval":                c.evalInterval.String(),
		"rules.query-offset":                       c.ruleQueryOffset.String(),
		"rules.alert.for-outage-tolerance":         c.outageTolerance.String(),
		"rules.alert.for-grace-period":             c.forGracePeriod.String(),
		"rules.alert.resend-delay":                 c.resendDelay.String(),
		"rules.max-concurrent-evals":               strconv.FormatInt(c.maxConcurrentEvals, 10),
		"alertmanager.url":                         c.alertmanagers.String(),
		"alertmanager.timeout":                     c.amClient.Timeout.String(),
		"alertmanager.notification-queue-capacity": strconv.Itoa(c.amQueueCapacity),
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log.level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log.format must be text or json, got %q", format)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "tsdb" {
		if err := runTSDB(os.Args[2:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "tandem tsdb:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "docs" { // hidden: `tandem docs config` prints docs/configuration.md
		if err := runDocs(os.Args[2:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "tandem docs:", err)
			os.Exit(2)
		}
		return
	}
	c, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		writeUsage(os.Stdout, newFlagSet(&config{}))
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tandem:", err)
		fmt.Fprintln(os.Stderr, "Run 'tandem --help' for the flags.")
		os.Exit(2)
	}
	if c.showVersion {
		fmt.Printf("tandem %s (revision %s, branch %s, built %s, %s)\n", version, revision, branch, buildDate, runtime.Version())
		return
	}
	logger, err := newLogger(c.logLevel, c.logFormat)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tandem:", err)
		os.Exit(2)
	}
	if os.Getenv("GOGC") == "" {
		defer gctune.Start(c.gogc, uint64(max(c.gcMinHeadroom, 0))).Stop()
	}
	if err := runServer(c, logger); err != nil {
		logger.Error("tandem stopped with an error", "err", err)
		os.Exit(1)
	}
}

// storageMetadata adapts the storage's metadata to the API's type.
type storageMetadata struct{ db *tsdb.DB }

func (m storageMetadata) MetricMetadata(metric string, limit, perMetric int) map[string][]api.MetricMetadata {
	out := map[string][]api.MetricMetadata{}
	for name, list := range m.db.MetricMetadata(metric, limit, perMetric) {
		for _, md := range list {
			out[name] = append(out[name], api.MetricMetadata{Type: md.Type, Help: md.Help, Unit: md.Unit})
		}
	}
	return out
}

// blockMetas lists the storage's blocks in Prometheus's format.
func blockMetas(db *tsdb.DB) func() ([]promtsdb.BlockMeta, error) {
	return func() ([]promtsdb.BlockMeta, error) {
		metas := db.Blocks()
		out := make([]promtsdb.BlockMeta, 0, len(metas))
		for _, m := range metas {
			id, err := ulid.ParseStrict(m.ULID)
			if err != nil {
				return nil, fmt.Errorf("block %q: %w", m.ULID, err)
			}
			bm := promtsdb.BlockMeta{ULID: id, MinTime: m.MinTime, MaxTime: m.MaxTime, Version: m.Version}
			bm.Stats.NumSamples, bm.Stats.NumFloatSamples = m.Stats.NumSamples, m.Stats.NumSamples
			bm.Stats.NumSeries, bm.Stats.NumChunks = m.Stats.NumSeries, m.Stats.NumChunks
			bm.Compaction.Level = m.Compaction.Level
			for _, s := range m.Compaction.Sources {
				if sid, err := ulid.ParseStrict(s); err == nil {
					bm.Compaction.Sources = append(bm.Compaction.Sources, sid)
				}
			}
			out = append(out, bm)
		}
		return out, nil
	}
}

// headOptions are the head options c sets.
func headOptions(c *config) head.Options {
	opts := head.DefaultOptions()
	opts.GroupBy = splitList(c.groupBy)
	opts.SenderLabels = splitList(c.senderLabels)
	opts.OpenWindow = c.openWindow
	opts.ChunkRows = c.chunkRows
	opts.MaxFutureSkew = c.maxFutureSkew
	opts.OutOfOrderWindow = c.oooWindow
	opts.LateMaxAge = c.lateMaxAge
	opts.MaxSampleAge = c.maxSampleAge
	opts.InferStalenessRows = c.inferStale
	opts.HAReplicaLabel = c.haReplica
	opts.HAFailoverTimeout = c.haFailover
	if c.haCluster != "" && !slices.Contains(opts.SenderLabels, c.haCluster) {
		opts.SenderLabels = append(opts.SenderLabels, c.haCluster)
	}
	opts.SenderLabels = slices.DeleteFunc(opts.SenderLabels, func(l string) bool { return l == c.haReplica })
	opts.WALSyncInterval = c.walSync
	opts.WALSegmentSize = c.walSegment
	opts.BlockRange = c.blockRange
	if opts.MaxSampleAge <= 0 {
		opts.MaxSampleAge = max(opts.LateMaxAge, opts.BlockRange)
	}
	return opts
}

func runServer(c *config, logger *slog.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tandem_build_info", Help: "tandem's version.",
			ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": runtime.Version()},
		}, func() float64 { return 1 }))

	opts := headOptions(c)
	opts.Logger = logger
	opts.Registerer = reg

	extURL, err := externalURL(c.externalURL, c.listenAddress)
	if err != nil {
		return err
	}

	banner := []any{"version", version, "revision", revision, "go", runtime.Version(),
		"storage.path", c.storagePath, "web.listen-address", c.listenAddress,
		"group.by", opts.GroupBy, "group.sender-labels", opts.SenderLabels, "ha.replica-label", opts.HAReplicaLabel}
	if c.configFile != "" {
		banner = append(banner, "config.file", c.configFile)
	}
	logger.Info("starting tandem", banner...)

	// Listen before replaying so health checks answer (not ready) during replay.
	ln, err := net.Listen("tcp", c.listenAddress)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.listenAddress, err)
	}
	var store storageHandlers
	mux := http.NewServeMux()
	handlerDuration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tandem_http_request_duration_seconds",
		Help:    "HTTP request latency by handler.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
	}, []string{"handler"})
	reg.MustRegister(handlerDuration)
	instrument := func(name string, h http.Handler) http.Handler {
		return promhttp.InstrumentHandlerDuration(handlerDuration.MustCurryWith(prometheus.Labels{"handler": name}), h)
	}
	// The server's metrics and every tenant's storage's (labelled tenant).
	gatherer := prometheus.Gatherers{reg, prometheus.GathererFunc(store.gatherTenants)}
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{Registry: reg}))
	if c.security.enablePprof { // Go's profiler, as Prometheus and VictoriaMetrics serve it
		registerPprof(mux)
	}
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "tandem is healthy.")
	})
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !store.ready() {
			http.Error(w, "tandem is not ready: replaying the WAL.", http.StatusServiceUnavailable)
			return
		}
		if err := store.writable(); err != nil {
			// Writes are refused (503) until the WAL can be written again.
			http.Error(w, "tandem is not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "tandem is ready.")
	})
	mux.Handle("/api/v1/", instrument("api", http.HandlerFunc(store.serveAPI)))
	mux.Handle("/api/v1/write", instrument("write", http.HandlerFunc(store.serveWrite)))
	mux.Handle("/api/v1/status/groups", instrument("groups", http.HandlerFunc(store.groupsHandler)))
	mux.Handle("/api/v1/admin/tenant/delete", instrument("delete_tenant", store.deleteTenantHandler(c.enableAdmin)))
	// Rule reloads (POST/PUT /-/reload, SIGHUP) reach the rules once they are loaded.
	var ruleSvc atomic.Pointer[rules.Service]
	// reloadRules reloads the rule files; with --config.file it first reads
	// the file again, so a changed rules.file list takes effect.
	reloadDefault := func(svc *rules.Service) error {
		if c.configFile == "" {
			return svc.Reload()
		}
		nc, err := parseFlags(os.Args[1:])
		if err != nil {
			logger.Error("reloading the configuration file failed; the previous rules stay in effect", "err", err)
			return fmt.Errorf("reload configuration: %w", err)
		}
		return svc.ReloadFiles(tenantRuleFiles(nc, c.tenancy.defaultID))
	}
	// reloadRules reloads everything a reload covers: the limits file, the
	// tenants' rule files and the default tenant's.
	reloadRules := func(svc *rules.Service) error {
		err := store.reloadTenants()
		if err != nil {
			logger.Error("reloading the limits file or a tenant's rules failed; the previous ones stay in effect", "err", err)
		}
		return errors.Join(err, reloadDefault(svc))
	}
	mux.Handle("/-/reload", lifecycle(c.security.enableLifecycle, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		svc := ruleSvc.Load()
		if svc == nil {
			http.Error(w, "tandem is not ready: replaying the WAL.", http.StatusServiceUnavailable)
			return
		}
		rules.ReloadHandler(func() error { return reloadRules(svc) }).ServeHTTP(w, r)
	})))
	quit := newQuitter()
	mux.Handle("/-/quit", lifecycle(c.security.enableLifecycle, quit))

	srv := newHTTPServer(mux, c.server)
	var g run.Group
	{
		g.Add(func() error { return serveWeb(srv, ln, &c.security, logger) }, func(error) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
		})
	}
	quit.addTo(&g, logger)
	{
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		done := make(chan struct{})
		g.Add(func() error {
			select {
			case s := <-sig:
				logger.Info("received signal, shutting down", "signal", s.String())
			case <-done:
			}
			return nil
		}, func(error) { close(done) })
	}
	{
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		done := make(chan struct{})
		g.Add(func() error {
			for {
				select {
				case <-hup:
					svc := ruleSvc.Load()
					if svc == nil {
						logger.Warn("SIGHUP before start-up finished; the rule files are loaded at start-up")
						continue
					}
					logger.Info("SIGHUP: reloading rule files")
					_ = reloadRules(svc) // logged and exported by the service
				case <-done:
					signal.Stop(hup)
					return nil
				}
			}
		}, func(error) { close(done) })
	}
	// The storage actor hands the rule service over once the storage is open.
	rulesReady := make(chan *rules.Service, 1)
	{
		ctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error {
			select {
			case svc := <-rulesReady:
				if err := svc.Run(ctx); err != nil {
					return fmt.Errorf("rule evaluation: %w", err)
				}
				return nil
			case <-ctx.Done():
				return nil
			}
		}, func(error) { cancel() })
	}
	{
		// Open the tenants' storages (WAL replay), then serve; then
		// maintain them until the group stops.
		ctx, cancel := context.WithCancel(context.Background())
		var ts *tenants
		g.Add(func() error {
			var err error
			ts, err = openTenants(c, opts, logger, reg, extURL, ruleSvc.Store)
			if err != nil {
				return err
			}
			wh := remote.NewTenantWriteHandler(ts, remote.WriteHandlerOptions{
				Limits: c.limits, Logger: logger, Registerer: reg, RateLimitedStatus: c.tenancy.rateLimitedStatus,
			})
			store.set(ts, wh)
			rulesReady <- ruleSvc.Load()
			logger.Info("tandem is ready", "address", ln.Addr().String(), "tenants", ts.reg.Len())
			ts.overrides.Run(ctx, c.tenancy.limitsReload)
			<-ctx.Done()
			return nil
		}, func(error) {
			cancel()
		})
		defer func() {
			if ts != nil {
				if err := ts.reg.Close(); err != nil {
					logger.Error("closing storage", "err", err)
				}
			}
		}()
	}
	return g.Run()
}

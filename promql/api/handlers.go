package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	v1 "github.com/prometheus/prometheus/web/api/v1"
)

// Error types of the Prometheus API envelope used by tandem's own handlers.
const (
	errorBadData  = "bad_data"
	errorInternal = "internal"
)

// maxTSDBStatusLimit is upstream's upper bound for /status/tsdb?limit.
const maxTSDBStatusLimit = 10000

// headChunksMetric is the gauge /status/tsdb reads the head chunk count from,
// as Prometheus does; tandem's head may export it under the same name.
const headChunksMetric = "prometheus_tsdb_head_chunks"

// envelope is the Prometheus API response envelope.
type envelope struct {
	Status    string `json:"status"`
	Data      any    `json:"data,omitempty"`
	ErrorType string `json:"errorType,omitempty"`
	Error     string `json:"error,omitempty"`
}

// respond writes data in a success envelope.
func respond(w http.ResponseWriter, logger *slog.Logger, data any) {
	writeEnvelope(w, logger, http.StatusOK, envelope{Status: "success", Data: data})
}

// respondError writes an error envelope with Prometheus's status code for typ.
func respondError(w http.ResponseWriter, logger *slog.Logger, typ string, err error) {
	code := http.StatusInternalServerError
	if typ == errorBadData {
		code = http.StatusBadRequest
	}
	writeEnvelope(w, logger, code, envelope{Status: "error", ErrorType: typ, Error: err.Error()})
}

func writeEnvelope(w http.ResponseWriter, logger *slog.Logger, code int, e envelope) {
	b, err := json.Marshal(e)
	if err != nil {
		logger.Error("Error marshaling API response", "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if _, err := w.Write(b); err != nil {
		logger.Debug("Error writing API response", "err", err)
	}
}

// intParam parses the optional integer form parameter name, returning def when
// it is absent.
func intParam(r *http.Request, name string, def int) (int, error) {
	s := r.FormValue(name)
	if s == "" {
		return def, nil
	}
	return strconv.Atoi(s)
}

// metadataHandler serves /api/v1/metadata from src with upstream's parameter
// semantics: limit (max metrics; negative or absent is unlimited, 0 returns
// none), limit_per_metric (max entries per metric; <=0 is unlimited), metric
// (a single metric name).
func metadataHandler(src MetadataSource, logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		limit, err := intParam(r, "limit", -1)
		if err != nil {
			respondError(w, logger, errorBadData, errors.New("limit must be a number"))
			return
		}
		limitPerMetric, err := intParam(r, "limit_per_metric", -1)
		if err != nil {
			respondError(w, logger, errorBadData, errors.New("limit_per_metric must be a number"))
			return
		}
		metric := r.FormValue("metric")

		res := map[string][]MetricMetadata{}
		if src == nil || limit == 0 {
			respond(w, logger, res)
			return
		}
		got := src.MetricMetadata(metric, max(limit, 0), max(limitPerMetric, 0))

		// Enforce the limits even if the source over-delivers, keeping the
		// lexicographically first metrics so the answer is deterministic.
		names := make([]string, 0, len(got))
		for name, entries := range got {
			if len(entries) > 0 && (metric == "" || name == metric) {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		if limit > 0 && len(names) > limit {
			names = names[:limit]
		}
		for _, name := range names {
			entries := got[name]
			if limitPerMetric > 0 && len(entries) > limitPerMetric {
				entries = entries[:limitPerMetric]
			}
			res[name] = entries
		}
		respond(w, logger, res)
	}
}

// tsdbStatusHandler serves /api/v1/status/tsdb like upstream's
// serveTSDBStatus, with a head chunk count of 0 when the gatherer does not
// export headChunksMetric.
func tsdbStatusHandler(stats adminStats, gatherer prometheus.Gatherer, logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		limit, err := intParam(r, "limit", 10)
		if err != nil || limit < 1 {
			respondError(w, logger, errorBadData, errors.New("limit must be a positive number"))
			return
		}
		if limit > maxTSDBStatusLimit {
			respondError(w, logger, errorBadData, fmt.Errorf("limit must not exceed %d", maxTSDBStatusLimit))
			return
		}
		s, err := stats.Stats(labels.MetricName, limit)
		if err != nil {
			respondError(w, logger, errorInternal, err)
			return
		}
		chunkCount, err := headChunks(gatherer)
		if err != nil {
			respondError(w, logger, errorInternal, err)
			return
		}
		respond(w, logger, v1.TSDBStatus{
			HeadStats: v1.HeadStats{
				NumSeries:     s.NumSeries,
				NumLabelPairs: s.IndexPostingStats.NumLabelPairs,
				ChunkCount:    chunkCount,
				MinTime:       s.MinTime,
				MaxTime:       s.MaxTime,
			},
			SeriesCountByMetricName:     v1.TSDBStatsFromIndexStats(s.IndexPostingStats.CardinalityMetricsStats),
			LabelValueCountByLabelName:  v1.TSDBStatsFromIndexStats(s.IndexPostingStats.CardinalityLabelStats),
			MemoryInBytesByLabelName:    v1.TSDBStatsFromIndexStats(s.IndexPostingStats.LabelValueStats),
			SeriesCountByLabelValuePair: v1.TSDBStatsFromIndexStats(s.IndexPostingStats.LabelValuePairsStats),
		})
	}
}

// headChunks returns the value of the headChunksMetric gauge, or 0 if absent.
func headChunks(gatherer prometheus.Gatherer) (int64, error) {
	mfs, err := gatherer.Gather()
	if err != nil {
		return 0, fmt.Errorf("error gathering runtime status: %w", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != headChunksMetric || len(mf.GetMetric()) == 0 {
			continue
		}
		if g := mf.GetMetric()[0].GetGauge(); g != nil {
			return int64(g.GetValue()), nil
		}
	}
	return 0, nil
}

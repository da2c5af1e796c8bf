package tsdb

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

func TestExpHints(t *testing.T) {
	st := promqltest.LoadedStorage(t, `
load 1m
  mixed {{sum:6 count:5 buckets:[2 2 1]}}+{{sum:2 count:3 buckets:[1 1 1]}}x4 {{sum:4 count:4 counter_reset_hint:gauge buckets:[1 2 1]}} {{sum:6 count:5 buckets:[2 2 1]}}+{{sum:2 count:3 buckets:[1 1 1]}}x4 {{sum:4 count:4 buckets:[1 2 1]}}+{{sum:2 count:3 buckets:[1 1 1]}}x5
  some_metric{env="3"} {{count:1}} {{count:2}}
  honlywithreset {{schema:0 sum:1 count:1 buckets:[1]}} {{schema:0 sum:2 count:2 buckets:[2]}} {{schema:0 sum:3 count:3 buckets:[3]}} {{schema:0 sum:1 count:1 buckets:[1] counter_reset_hint:reset}}
`)
	q, _ := st.Querier(math.MinInt64, math.MaxInt64)
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+"))
	for ss.Next() {
		it := ss.At().Iterator(nil)
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			tt, h := it.AtFloatHistogram(nil)
			fmt.Println(ss.At().Labels(), tt/60000, h.CounterResetHint, h.Count)
		}
	}
}

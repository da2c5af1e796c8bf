// Package fastread is the contract between tandem's storage and its query
// layer beyond storage.Querier: the Select hints with which a caller says it
// reads less than whole series, and the interface of series that decode
// their samples column by column. The storage (tsdb, tsdb/head) implements
// it; the push-down evaluator (promql/pushdown) uses it when present and
// falls back to Prometheus's interfaces otherwise, so other storages work
// unchanged.
package fastread

import (
	"context"
	"errors"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// ErrHistogram is returned (wrapped) by AppendFloats and AppendIter when the
// series holds a native histogram sample in the range asked for: the caller
// reads it through the series' iterator instead.
var ErrHistogram = errors.New("series holds native histogram samples")

// HintLastSample, as storage.SelectHints.Func, says that the caller reads
// only the newest sample at or before End of each series (an instant
// selector evaluated at one time); storages may return series holding only
// that sample. Other storages ignore it.
const HintLastSample = "tandem_last_sample"

// HintSeries is the storage.SelectHints.Func of Prometheus's HTTP API when it
// reads only the labels of the selected series.
const HintSeries = "series"

// FloatAppender is implemented by the series tandem's queriers return: it
// appends the series' float samples in [mint, maxt] (within the range the
// series was selected for) to ts and vs, in time order, decoding column by
// column instead of sample by sample through an iterator.
type FloatAppender interface {
	AppendFloats(ts []int64, vs []float64, mint, maxt int64) ([]int64, []float64, error)
}

// Sized is implemented by the series sets tandem's queriers return when
// they know how many series they yield at most: a caller that keeps them
// all sizes its buffers once instead of growing them. (A set merging
// several queriers' does not implement it.)
type Sized interface {
	Len() int
}

// Streamer is implemented by the queriers of tandem's storage that can
// yield series without holding all of them. SelectStream is Select, unsorted,
// cut into at most parts sets that yield, one after the other, what Select
// would, and that may be read concurrently, one goroutine each; each series
// is valid only until the next call of its set's Next (its labels stay
// valid), so that memory is reused from series to series. A caller that
// reads each series as it comes (an aggregation) uses it; a querier that
// cannot stream does not implement it, or returns Select's set alone.
type Streamer interface {
	SelectStream(ctx context.Context, parts int, hints *storage.SelectHints, ms ...*labels.Matcher) []storage.SeriesSet
}

// StartTimestamper is implemented by the series tandem's queriers return:
// HasStartTimestamps reports whether any of the series' samples in the range
// it was selected for may have a start timestamp, so that a caller that
// would ignore them (AppendFloats yields none) reads the iterator instead.
type StartTimestamper interface {
	HasStartTimestamps() bool
}

// AppendIter appends what it yields in [mint, maxt] to ts and vs: the
// FloatAppender of a series that has only an iterator, or of one whose
// fast path does not apply.
func AppendIter(it chunkenc.Iterator, ts []int64, vs []float64, mint, maxt int64) ([]int64, []float64, error) {
	for vt := it.Seek(mint); vt != chunkenc.ValNone; vt = it.Next() {
		if vt != chunkenc.ValFloat {
			if it.AtT() > maxt {
				break
			}
			return ts, vs, ErrHistogram
		}
		t, v := it.At()
		if t > maxt {
			break
		}
		ts, vs = append(ts, t), append(vs, v)
	}
	return ts, vs, it.Err()
}

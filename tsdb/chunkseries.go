package tsdb

import (
	"fmt"
	"math"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
)

// chunkSeriesSplit is the most samples a chunk encoded from a series' samples
// holds, like Prometheus's storage.NewSeriesToChunkEncoder.
const chunkSeriesSplit = 120

// newChunkSeriesSet returns ss as a storage.ChunkSeriesSet whose series encode
// their samples into chunks lazily: a series' chunk iterator cuts one chunk at
// a time from the series' sample iterator, so serving a series (a streamed
// remote read) holds only the chunks its consumer still references, never all
// of them, whatever the series' length.
//
// The chunks are the ones storage.NewSeriesSetToChunkSet would build (same
// boundaries, encodings and bytes): a chunk is cut after 120 samples, on a
// change of value type, when a float sample needs a start timestamp an XOR
// chunk cannot store, and where Prometheus's histogram appenders start a new
// chunk (a counter reset, incompatible bucket layouts).
func newChunkSeriesSet(ss storage.SeriesSet) storage.ChunkSeriesSet {
	return &chunkSeriesSet{SeriesSet: ss}
}

type chunkSeriesSet struct {
	storage.SeriesSet
}

func (c *chunkSeriesSet) Next() bool {
	return c.SeriesSet.Err() == nil && c.SeriesSet.Next()
}

func (c *chunkSeriesSet) At() storage.ChunkSeries {
	return &chunkSeries{Series: c.SeriesSet.At()}
}

// chunkSeries is a series whose Iterator yields its samples cut into chunks.
type chunkSeries struct {
	storage.Series
}

// Iterator returns the series' chunks, encoded as they are iterated. It reuses
// it (and the sample iterator inside) when it is one of its own.
func (s *chunkSeries) Iterator(it chunks.Iterator) chunks.Iterator {
	ci, ok := it.(*lazyChunkIterator)
	if !ok || ci == nil {
		ci = &lazyChunkIterator{}
	}
	ci.reset(s.Series)
	return ci
}

// lazyChunkIterator encodes a sample iterator into chunks one chunk at a time.
// Every chunk it yields is a new one that it never writes to again: a consumer
// may keep the chunk's bytes after Next (remote read marshals a frame of
// several chunks at once).
type lazyChunkIterator struct {
	samples chunkenc.Iterator

	// The chunk being filled: nil before the first sample.
	chk        chunkenc.Chunk
	app        chunkenc.Appender
	n          int // samples in chk, counted from its last cut
	lastType   chunkenc.ValueType
	mint, maxt int64

	ready []chunks.Meta // completed chunks, yielded from ready[next]
	next  int
	cur   chunks.Meta
	done  bool // the sample iterator is exhausted
	err   error
}

var _ chunks.Iterator = (*lazyChunkIterator)(nil)

func (it *lazyChunkIterator) reset(s storage.Series) {
	clear(it.ready)
	*it = lazyChunkIterator{
		samples:  s.Iterator(it.samples),
		lastType: chunkenc.ValNone,
		ready:    it.ready[:0],
	}
}

// At returns the current chunk.
func (it *lazyChunkIterator) At() chunks.Meta { return it.cur }

// Err returns the error that ended the iteration.
func (it *lazyChunkIterator) Err() error { return it.err }

// Next encodes samples until a chunk is complete and makes it current.
func (it *lazyChunkIterator) Next() bool {
	for {
		if it.next < len(it.ready) {
			it.cur = it.ready[it.next]
			it.ready[it.next] = chunks.Meta{}
			it.next++
			return true
		}
		it.ready, it.next = it.ready[:0], 0
		if it.err != nil || it.done {
			it.cur = chunks.Meta{}
			return false
		}
		typ := it.samples.Next()
		if typ == chunkenc.ValNone {
			it.done = true
			if err := it.samples.Err(); err != nil {
				it.fail(err)
				continue
			}
			it.complete()
			it.chk, it.app = nil, nil
			continue
		}
		if err := it.append(typ); err != nil {
			it.fail(err)
		}
	}
}

func (it *lazyChunkIterator) fail(err error) {
	it.err = err
	it.chk, it.app = nil, nil
	clear(it.ready)
	it.ready, it.next = it.ready[:0], 0
}

// complete queues the chunk being filled, if any.
func (it *lazyChunkIterator) complete() {
	if it.chk != nil {
		it.ready = append(it.ready, chunks.Meta{MinTime: it.mint, MaxTime: it.maxt, Chunk: it.chk})
	}
}

// append adds the sample the sample iterator is at, first cutting the chunk
// being filled where storage.NewSeriesToChunkEncoder would.
func (it *lazyChunkIterator) append(typ chunkenc.ValueType) error {
	st := it.samples.AtST()
	hasST := st != 0
	desired := typ.ChunkEncoding(hasST, hasST)
	cut := typ != it.lastType || it.n >= chunkSeriesSplit
	if !cut && it.chk.Encoding() != desired {
		// XOR and XOR2 are append-compatible: only a start timestamp, which
		// an XOR chunk cannot hold, forces a cut between them.
		cut = !chunkenc.CompatibleValues(it.chk.Encoding(), desired) ||
			(hasST && it.chk.Encoding() == chunkenc.EncXOR)
	}
	if cut {
		it.complete()
		chk, err := chunkenc.NewEmptyChunk(desired)
		if err != nil {
			return err
		}
		app, err := chk.Appender()
		if err != nil {
			return err
		}
		it.chk, it.app = chk, app
		it.mint, it.n = math.MaxInt64, 0
	}
	it.lastType = typ

	var (
		t      int64
		newChk chunkenc.Chunk
		recode bool
		err    error
	)
	switch typ {
	case chunkenc.ValFloat:
		var v float64
		t, v = it.samples.At()
		it.app.Append(st, t, v)
	case chunkenc.ValHistogram:
		var h *histogram.Histogram
		t, h = it.samples.AtHistogram(nil)
		newChk, recode, it.app, err = it.app.AppendHistogram(nil, st, t, h, false)
	case chunkenc.ValFloatHistogram:
		var fh *histogram.FloatHistogram
		t, fh = it.samples.AtFloatHistogram(nil)
		newChk, recode, it.app, err = it.app.AppendFloatHistogram(nil, st, t, fh, false)
	default:
		return fmt.Errorf("unknown sample type %s", typ.String())
	}
	if err != nil {
		return err
	}
	if newChk != nil {
		// The appender started a new chunk (the sample did not fit) or
		// recoded the current one into newChk (which replaces it).
		if !recode {
			it.complete()
			it.mint, it.n = math.MaxInt64, 0
		}
		it.chk = newChk
	}
	it.maxt = t
	if it.mint == math.MaxInt64 {
		it.mint = t
	}
	it.n++
	return nil
}

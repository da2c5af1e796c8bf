package block

import (
	"fmt"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/tsdb/starts"
)

// The starts file holds the start timestamps (ST) of a block's samples as
// runs (package starts), series by series in label order; series are named
// by their label sets, like the exemplars file's. A block none of whose
// samples has a start timestamp has no such file (neither do blocks written
// before version 6). The byte format is described in docs/format/block.md.

// StartsFilename is the name of the optional start timestamps file of a block.
const StartsFilename = "starts"

const (
	startsMagic     = 0x544E4453 // "TNDS"
	startsHeaderLen = seriesFileHeaderLen
	startsTOCLen    = seriesFileTOCLen
)

// SeriesStarts are the start timestamp runs of one series.
type SeriesStarts struct {
	Labels labels.Labels
	Runs   starts.Runs
}

// StartSource yields the start timestamps of a block series by series, in
// strictly ascending label order (labels.Compare); it stops and returns
// yield's error if yield fails. The *SeriesStarts may be reused by the
// source after yield returns.
type StartSource func(yield func(*SeriesStarts) error) error

// writeStarts writes the starts file at path from src and counts its series
// in meta; series without a start timestamp are skipped, and no file is
// created when none is left.
func writeStarts(path string, src StartSource, mint, maxt int64, meta *Meta) (err error) {
	w := seriesFileWriter{path: path, magic: startsMagic}
	defer func() {
		if err != nil {
			w.abort()
		}
	}()
	var (
		prev labels.Labels
		nrun uint64
		body []byte
	)
	err = src(func(ss *SeriesStarts) error {
		if !ss.Runs.HasST() {
			return nil
		}
		if w.n > 0 && labels.Compare(prev, ss.Labels) >= 0 {
			return fmt.Errorf("%s: series %s after %s: not in ascending label order", path, ss.Labels, prev)
		}
		if err := validLabels(ss.Labels); err != nil {
			return fmt.Errorf("%s: series %s: %w", path, ss.Labels, err)
		}
		if err := validRuns(ss.Runs, mint, maxt); err != nil {
			return fmt.Errorf("%s: series %s: %w", path, ss.Labels, err)
		}
		body = ss.Runs.AppendEncoded(appendLabels(body[:0], ss.Labels))
		if err := w.add(body); err != nil {
			return err
		}
		nrun += uint64(len(ss.Runs))
		prev = ss.Labels.Copy()
		return nil
	})
	if err != nil {
		return err
	}
	if err := w.finish(nrun); err != nil {
		return err
	}
	meta.Stats.NumStartSeries = w.n
	return nil
}

// validRuns checks that runs are well formed, in strictly increasing
// non-overlapping order, and lie in [mint, maxt).
func validRuns(rs starts.Runs, mint, maxt int64) error {
	for i, r := range rs {
		switch {
		case r.Kind > starts.Offset:
			return fmt.Errorf("run %d: unknown kind %d", i, r.Kind)
		case r.From > r.To || uint64(r.To-r.From) > 1<<62:
			return fmt.Errorf("run %d: bad span [%d, %d]", i, r.From, r.To)
		case r.From < mint || r.To >= maxt:
			return fmt.Errorf("run %d: [%d, %d] outside [%d, %d)", i, r.From, r.To, mint, maxt)
		case i > 0 && r.From <= rs[i-1].To:
			return fmt.Errorf("run %d starts at %d, not after %d", i, r.From, rs[i-1].To)
		}
	}
	return nil
}

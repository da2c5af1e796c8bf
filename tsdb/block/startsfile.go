package block

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

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
	startsHeaderLen = 8
	startsTOCLen    = 28
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
	var (
		f             *countingWriter
		prev          labels.Labels
		nseries, nrun uint64
		body, head    []byte
		crc           [4]byte
	)
	defer func() {
		if err != nil && f != nil {
			f.f.Close()
		}
	}()
	err = src(func(ss *SeriesStarts) error {
		if !ss.Runs.HasST() {
			return nil
		}
		if nseries > 0 && labels.Compare(prev, ss.Labels) >= 0 {
			return fmt.Errorf("%s: series %s after %s: not in ascending label order", path, ss.Labels, prev)
		}
		if err := validLabels(ss.Labels); err != nil {
			return fmt.Errorf("%s: series %s: %w", path, ss.Labels, err)
		}
		if err := validRuns(ss.Runs, mint, maxt); err != nil {
			return fmt.Errorf("%s: series %s: %w", path, ss.Labels, err)
		}
		if f == nil {
			var err error
			if f, err = createFile(path); err != nil {
				return err
			}
			var hdr [startsHeaderLen]byte
			binary.BigEndian.PutUint32(hdr[:], startsMagic)
			hdr[4] = FormatVersion
			if _, err := f.Write(hdr[:]); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
		body = ss.Runs.AppendEncoded(appendLabels(body[:0], ss.Labels))
		head = binary.AppendUvarint(head[:0], uint64(len(body)))
		binary.BigEndian.PutUint32(crc[:], crc32.Checksum(body, castagnoli))
		for _, b := range [][]byte{head, body, crc[:]} {
			if _, err := f.Write(b); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
		nseries++
		nrun += uint64(len(ss.Runs))
		prev = ss.Labels.Copy()
		return nil
	})
	if err != nil || f == nil {
		return err
	}
	var toc [startsTOCLen]byte
	binary.BigEndian.PutUint64(toc[0:], f.off)
	binary.BigEndian.PutUint64(toc[8:], nseries)
	binary.BigEndian.PutUint64(toc[16:], nrun)
	binary.BigEndian.PutUint32(toc[24:], crc32.Checksum(toc[:24], castagnoli))
	if _, err := f.Write(toc[:]); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	err = f.finish()
	f = nil // closed by finish
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	meta.Stats.NumStartSeries = nseries
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

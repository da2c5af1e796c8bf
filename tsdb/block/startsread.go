package block

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/tsdb/starts"
)

// startsIndex is the decoded starts file: every series' runs, found by label hash.
type startsIndex struct {
	entries []startsEntry    // in label order
	byHash  map[uint64]int32 // label hash → first entry with it
}

type startsEntry struct {
	lset labels.Labels
	runs starts.Runs
	next int32 // the next entry with the same label hash, -1 if none
}

// openStarts checks the starts file's header and TOC.
func (b *Block) openStarts() error {
	x := b.startsFile
	if len(x) < startsHeaderLen+startsTOCLen {
		return fmt.Errorf("file of %d bytes too short: %w", len(x), ErrCorrupt)
	}
	if m := binary.BigEndian.Uint32(x); m != startsMagic {
		return fmt.Errorf("bad magic %#x: %w", m, ErrCorrupt)
	}
	if !readableVersion(int(x[4])) || x[4] < 6 || x[5]|x[6]|x[7] != 0 {
		return fmt.Errorf("unsupported version %d or flags %x: %w", x[4], x[5:8], ErrCorrupt)
	}
	toc := x[len(x)-startsTOCLen:]
	if crc32.Checksum(toc[:24], castagnoli) != binary.BigEndian.Uint32(toc[24:]) && !b.opts.skipIndexCRC {
		return fmt.Errorf("TOC checksum mismatch: %w", ErrCorrupt)
	}
	if end := binary.BigEndian.Uint64(toc); end != uint64(len(x)-startsTOCLen) {
		return fmt.Errorf("TOC says records end at %d, file has %d bytes: %w", end, len(x), ErrCorrupt)
	}
	ns, nr := binary.BigEndian.Uint64(toc[8:]), binary.BigEndian.Uint64(toc[16:])
	// A record takes at least 6 bytes (length, no labels, 1 run count, CRC) plus 4 per run.
	if ns == 0 || ns > nr || ns > uint64(len(x))/6 || nr > uint64(len(x))/4 {
		return fmt.Errorf("TOC counts %d series and %d runs: %w", ns, nr, ErrCorrupt)
	}
	b.stSeries, b.stRuns = ns, nr
	return nil
}

// openStartsBytes parses a starts file held in memory, for fuzzing; with
// skipCRC, checksums are not checked.
func openStartsBytes(data []byte, skipCRC bool) (*Block, error) {
	b := &Block{startsPath: StartsFilename, startsFile: data, opts: OpenOptions{skipIndexCRC: skipCRC}}
	b.meta.MinTime, b.meta.MaxTime = math.MinInt64, math.MaxInt64
	if err := b.openStarts(); err != nil {
		return nil, fmt.Errorf("%s: %w", StartsFilename, err)
	}
	return b, nil
}

// NumStartSeries returns the number of series with start timestamps in the block (0 without a starts file).
func (b *Block) NumStartSeries() int { return int(b.stSeries) }

// loadStarts decodes the starts file, the first time it is called, checking
// every record; it returns the damage found, naming the file.
func (b *Block) loadStarts() (*startsIndex, error) {
	b.stOnce.Do(func() {
		if b.stSeries == 0 {
			return
		}
		b.stIndex, b.stErr = b.decodeStarts()
		if b.stErr != nil {
			b.stIndex, b.stErr = nil, fmt.Errorf("%s: %w", b.startsPath, b.stErr)
		}
	})
	return b.stIndex, b.stErr
}

// decodeStarts decodes every record of the starts file.
func (b *Block) decodeStarts() (*startsIndex, error) {
	x := b.startsFile
	end := uint64(len(x)) - startsTOCLen
	idx := &startsIndex{entries: make([]startsEntry, 0, b.stSeries), byHash: make(map[uint64]int32, b.stSeries)}
	// One array for every series' runs: the entries' slices of it never move.
	all := make(starts.Runs, 0, b.stRuns)
	var lb labels.ScratchBuilder
	for off := uint64(startsHeaderLen); off < end; {
		n, k := binary.Uvarint(x[off:end])
		if k <= 0 || n > end-off-uint64(k) || end-off-uint64(k)-n < 4 {
			return nil, fmt.Errorf("record at %d: bad length: %w", off, ErrCorrupt)
		}
		body := x[off+uint64(k) : off+uint64(k)+n]
		if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(x[off+uint64(k)+n:]) && !b.opts.skipIndexCRC {
			return nil, fmt.Errorf("record at %d: checksum mismatch: %w", off, ErrCorrupt)
		}
		if uint64(len(idx.entries)) == b.stSeries {
			return nil, fmt.Errorf("record at %d: more series than the TOC's %d: %w", off, b.stSeries, ErrCorrupt)
		}
		d := decbuf{b: body}
		ls, err := decodeLabels(&d, &lb)
		if err != nil {
			return nil, fmt.Errorf("record at %d: %w", off, err)
		}
		if i := len(idx.entries); i > 0 && labels.Compare(idx.entries[i-1].lset, ls) >= 0 {
			return nil, fmt.Errorf("record at %d: series %s not in ascending label order: %w", off, ls, ErrCorrupt)
		}
		from := len(all)
		if uint64(from) == b.stRuns {
			return nil, fmt.Errorf("record at %d: more runs than the TOC's %d: %w", off, b.stRuns, ErrCorrupt)
		}
		var used int
		all, used, err = starts.Decode(all[:from:b.stRuns], d.b)
		switch {
		case err != nil:
			return nil, fmt.Errorf("record at %d: series %s: %w: %w", off, ls, err, ErrCorrupt)
		case used != len(d.b):
			return nil, fmt.Errorf("record at %d: %d trailing bytes: %w", off, len(d.b)-used, ErrCorrupt)
		case cap(all) != int(b.stRuns):
			return nil, fmt.Errorf("record at %d: more runs than the TOC's %d: %w", off, b.stRuns, ErrCorrupt)
		}
		rs := all[from:len(all):len(all)]
		if !rs.HasST() {
			return nil, fmt.Errorf("record at %d: series %s without start timestamps: %w", off, ls, ErrCorrupt)
		}
		if err := validRuns(rs, b.meta.MinTime, b.meta.MaxTime); err != nil {
			return nil, fmt.Errorf("record at %d: series %s: %w: %w", off, ls, err, ErrCorrupt)
		}
		h := ls.Hash()
		e := startsEntry{lset: ls, runs: rs, next: -1}
		if first, ok := idx.byHash[h]; ok {
			e.next = first
		}
		idx.byHash[h] = int32(len(idx.entries))
		idx.entries = append(idx.entries, e)
		off += uint64(k) + n + 4
	}
	if uint64(len(idx.entries)) != b.stSeries || uint64(len(all)) != b.stRuns {
		return nil, fmt.Errorf("TOC counts %d series and %d runs, file holds %d and %d: %w", b.stSeries, b.stRuns, len(idx.entries), len(all), ErrCorrupt)
	}
	return idx, nil
}

// Starts returns the start timestamp runs of the series with labels lset,
// nil when it has none or the starts file is damaged (StartsErr).
func (b *Block) Starts(lset labels.Labels) starts.Runs {
	if b.stSeries == 0 {
		return nil
	}
	idx, err := b.loadStarts()
	if err != nil {
		return nil
	}
	i, ok := idx.byHash[lset.Hash()]
	for ok && i >= 0 {
		e := &idx.entries[i]
		if labels.Equal(e.lset, lset) {
			return e.runs
		}
		i = e.next
	}
	return nil
}

// StartsErr returns the damage of the block's starts file, decoding it if
// not done yet; nil when the file is sound or absent.
func (b *Block) StartsErr() error {
	_, err := b.loadStarts()
	return err
}

// StartsIterator walks the series of a block's starts file in label order.
type StartsIterator struct {
	idx        *startsIndex
	i          int
	mint, maxt int64
	cur        SeriesStarts
	err        error
}

// StartsIterator returns an iterator over the series with start timestamps
// in [mint, maxt], their runs clipped to it.
func (b *Block) StartsIterator(mint, maxt int64) *StartsIterator {
	idx, err := b.loadStarts()
	return &StartsIterator{idx: idx, mint: mint, maxt: maxt, err: err}
}

// Next advances to the next series.
func (it *StartsIterator) Next() bool {
	if it.idx == nil {
		return false
	}
	for it.i < len(it.idx.entries) {
		e := &it.idx.entries[it.i]
		it.i++
		if n := len(e.runs); e.runs[n-1].To < it.mint || e.runs[0].From > it.maxt {
			continue
		}
		if it.cur.Runs = e.runs.Clip(it.mint, it.maxt); it.cur.Runs != nil {
			it.cur.Labels = e.lset
			return true
		}
	}
	return false
}

// At returns the current series, valid until the next call of Next.
func (it *StartsIterator) At() *SeriesStarts { return &it.cur }

// Err returns the damage of the starts file found, if any.
func (it *StartsIterator) Err() error { return it.err }

// StartSource returns the start timestamps of the block in [mint, maxt]
// (runs clipped) as a source for Write.
func (b *Block) StartSource(mint, maxt int64) StartSource {
	return func(yield func(*SeriesStarts) error) error {
		it := b.StartsIterator(mint, maxt)
		for it.Next() {
			if err := yield(it.At()); err != nil {
				return err
			}
		}
		return it.Err()
	}
}

// verifyStarts checks the starts file completely: every checksum, the
// records' structure and order, the counts against the TOC and meta.json,
// and that every run lies in the block's range.
func (b *Block) verifyStarts() error {
	if b.startsFile == nil {
		if n := b.meta.Stats.NumStartSeries; n > 0 {
			return fmt.Errorf("%s: missing, meta.json counts %d series: %w", b.startsPath, n, ErrCorrupt)
		}
		return nil
	}
	if err := b.openStarts(); err != nil {
		return fmt.Errorf("%s: %w", b.startsPath, err)
	}
	if b.stSeries != b.meta.Stats.NumStartSeries {
		return fmt.Errorf("%s: TOC counts %d series, meta.json %d: %w", b.startsPath, b.stSeries, b.meta.Stats.NumStartSeries, ErrCorrupt)
	}
	return b.StartsErr()
}

// mapStarts maps the optional starts file at Open and checks its header, TOC and count.
func (b *Block) mapStarts() error {
	var err error
	if b.startsFile, err = mmapFile(b.startsPath); err != nil {
		b.startsFile = nil
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if n := b.meta.Stats.NumStartSeries; n > 0 {
			return fmt.Errorf("%s: missing, meta.json counts %d series: %w", b.startsPath, n, ErrCorrupt)
		}
		return nil
	}
	if err := b.openStarts(); err != nil {
		return fmt.Errorf("%s: %w", b.startsPath, err)
	}
	if b.stSeries != b.meta.Stats.NumStartSeries {
		return fmt.Errorf("%s: TOC counts %d series, meta.json %d: %w", b.startsPath, b.stSeries, b.meta.Stats.NumStartSeries, ErrCorrupt)
	}
	return nil
}

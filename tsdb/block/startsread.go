package block

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"slices"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/tsdb/starts"
)

// startsIndex is the decoded starts file: every series' runs, found by
// label hash. Labels stay in the mapped file (entries point at them), so
// memory holds 28 bytes per series and the runs.
type startsIndex struct {
	entries []startsEntry // in label order
	byHash  []uint32      // entry indices, by hash
	runs    starts.Runs   // every series' runs, one after the other
}

type startsEntry struct {
	hash         uint64 // of the series' labels
	labels       uint32 // offset of the series' labels in the file
	runLo, runHi uint32 // the series' runs in startsIndex.runs
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
	if end > math.MaxUint32 {
		return nil, fmt.Errorf("file of %d bytes too large: %w", len(x), ErrCorrupt)
	}
	// One array for every series' runs: it never grows past the TOC's count.
	idx := &startsIndex{entries: make([]startsEntry, 0, b.stSeries), runs: make(starts.Runs, 0, b.stRuns)}
	var lb labels.ScratchBuilder
	var prev labels.Labels
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
		if len(idx.entries) > 0 && labels.Compare(prev, ls) >= 0 {
			return nil, fmt.Errorf("record at %d: series %s not in ascending label order: %w", off, ls, ErrCorrupt)
		}
		lo := len(idx.runs)
		var used int
		idx.runs, used, err = starts.Decode(idx.runs, d.b)
		switch {
		case err != nil:
			return nil, fmt.Errorf("record at %d: series %s: %w: %w", off, ls, err, ErrCorrupt)
		case used != len(d.b):
			return nil, fmt.Errorf("record at %d: %d trailing bytes: %w", off, len(d.b)-used, ErrCorrupt)
		case uint64(len(idx.runs)) > b.stRuns:
			return nil, fmt.Errorf("record at %d: more runs than the TOC's %d: %w", off, b.stRuns, ErrCorrupt)
		}
		rs := idx.runs[lo:]
		if !rs.HasST() {
			return nil, fmt.Errorf("record at %d: series %s without start timestamps: %w", off, ls, ErrCorrupt)
		}
		if err := validRuns(rs, b.meta.MinTime, b.meta.MaxTime); err != nil {
			return nil, fmt.Errorf("record at %d: series %s: %w: %w", off, ls, err, ErrCorrupt)
		}
		idx.entries = append(idx.entries, startsEntry{hash: ls.Hash(), labels: uint32(off) + uint32(k), runLo: uint32(lo), runHi: uint32(len(idx.runs))})
		prev = ls
		off += uint64(k) + n + 4
	}
	if uint64(len(idx.entries)) != b.stSeries || uint64(len(idx.runs)) != b.stRuns {
		return nil, fmt.Errorf("TOC counts %d series and %d runs, file holds %d and %d: %w", b.stSeries, b.stRuns, len(idx.entries), len(idx.runs), ErrCorrupt)
	}
	idx.byHash = make([]uint32, len(idx.entries))
	for i := range idx.byHash {
		idx.byHash[i] = uint32(i)
	}
	slices.SortFunc(idx.byHash, func(i, j uint32) int { return cmp.Compare(idx.entries[i].hash, idx.entries[j].hash) })
	return idx, nil
}

// entryRuns returns the runs of entry e, capped so that appending copies them.
func (idx *startsIndex) entryRuns(e *startsEntry) starts.Runs {
	return idx.runs[e.runLo:e.runHi:e.runHi]
}

// Starts returns the start timestamp runs of the series with labels lset,
// nil when it has none or the starts file is damaged (StartsErr). The runs
// are the block's: callers must not modify them.
func (b *Block) Starts(lset labels.Labels) starts.Runs {
	if b.stSeries == 0 {
		return nil
	}
	idx, err := b.loadStarts()
	if err != nil {
		return nil
	}
	h := lset.Hash()
	i, _ := slices.BinarySearchFunc(idx.byHash, h, func(e uint32, h uint64) int { return cmp.Compare(idx.entries[e].hash, h) })
	for ; i < len(idx.byHash) && idx.entries[idx.byHash[i]].hash == h; i++ { // hash collisions: compare the labels
		e := &idx.entries[idx.byHash[i]]
		if equalEncodedLabels(b.startsFile[e.labels:], lset) {
			return idx.entryRuns(e)
		}
	}
	return nil
}

// equalEncodedLabels reports whether the labels appendLabels wrote at the
// start of enc (checked when the file was decoded) are lset.
func equalEncodedLabels(enc []byte, lset labels.Labels) bool {
	d := decbuf{b: enc}
	if d.uvarintInt(len(enc)) != lset.Len() {
		return false
	}
	eq := true
	lset.Range(func(l labels.Label) {
		if eq {
			name := d.bytes(d.uvarintInt(len(d.b)))
			value := d.bytes(d.uvarintInt(len(d.b)))
			eq = d.err == nil && string(name) == l.Name && string(value) == l.Value
		}
	})
	return eq
}

// StartsErr returns the damage of the block's starts file, decoding it if
// not done yet; nil when the file is sound or absent.
func (b *Block) StartsErr() error {
	_, err := b.loadStarts()
	return err
}

// StartsIterator walks the series of a block's starts file in label order.
// The block must stay open while it is used.
type StartsIterator struct {
	b          *Block
	idx        *startsIndex
	i          int
	mint, maxt int64
	lb         labels.ScratchBuilder
	cur        SeriesStarts
	err        error
}

// StartsIterator returns an iterator over the series with start timestamps
// in [mint, maxt], their runs clipped to it.
func (b *Block) StartsIterator(mint, maxt int64) *StartsIterator {
	idx, err := b.loadStarts()
	return &StartsIterator{b: b, idx: idx, mint: mint, maxt: maxt, err: err}
}

// Next advances to the next series.
func (it *StartsIterator) Next() bool {
	if it.idx == nil || it.err != nil {
		return false
	}
	for it.i < len(it.idx.entries) {
		e := &it.idx.entries[it.i]
		it.i++
		rs := it.idx.entryRuns(e)
		if rs[len(rs)-1].To < it.mint || rs[0].From > it.maxt {
			continue
		}
		if it.cur.Runs = rs.Clip(it.mint, it.maxt); it.cur.Runs == nil {
			continue
		}
		d := decbuf{b: it.b.startsFile[e.labels:]}
		if it.cur.Labels, it.err = decodeLabels(&d, &it.lb); it.err != nil {
			it.err = fmt.Errorf("%s: record at %d: %w", it.b.startsPath, e.labels, it.err)
			return false
		}
		return true
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
	if err := b.checkStartsTOC(); err != nil {
		return err
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
	return b.checkStartsTOC()
}

// checkStartsTOC reads the mapped starts file's header and TOC and checks
// its series count against meta.json.
func (b *Block) checkStartsTOC() error {
	if err := b.openStarts(); err != nil {
		return fmt.Errorf("%s: %w", b.startsPath, err)
	}
	if b.stSeries != b.meta.Stats.NumStartSeries {
		return fmt.Errorf("%s: TOC counts %d series, meta.json %d: %w", b.startsPath, b.stSeries, b.meta.Stats.NumStartSeries, ErrCorrupt)
	}
	return nil
}

package block

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/tsdb/internal/sorted"
)

// SeriesID returns the id of the series with labels lset, found by binary
// search (series ids are in label order); false if the block lacks it.
func (b *Block) SeriesID(lset labels.Labels) (uint32, bool, error) {
	var err error
	var lb labels.ScratchBuilder
	cmp := func(id int) int {
		lb.Reset()
		if _, e := b.series(uint32(id), &lb, nil); e != nil {
			err = e
			return 0
		}
		return labels.Compare(lb.Labels(), lset)
	}
	lo, hi := 0, b.nseries
	for lo < hi && err == nil {
		m := int(uint(lo+hi) >> 1)
		switch c := cmp(m); {
		case err != nil:
		case c == 0:
			return uint32(m), true, nil
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return 0, false, err
}

// LabelNames returns the sorted label names of the series matching ms (all series without matchers).
func (b *Block) LabelNames(ms ...*labels.Matcher) ([]string, error) {
	if len(ms) == 0 {
		out := make([]string, len(b.names))
		for i, e := range b.names {
			out[i] = e.name
		}
		return out, nil
	}
	ids, err := b.Postings(ms...)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, id := range ids {
		l, err := b.Labels(id)
		if err != nil {
			return nil, err
		}
		out = sorted.AddNames(out, l)
	}
	return out, nil
}

// LabelValues returns the sorted values of label name among the series matching ms (all series without matchers).
func (b *Block) LabelValues(name string, ms ...*labels.Matcher) ([]string, error) {
	e, ok := b.findName(name)
	if !ok {
		return []string{}, nil
	}
	if len(ms) == 0 {
		out := make([]string, 0, len(e.values)/8)
		err := b.forValues(e, func(v []byte, _ uint32) bool {
			out = append(out, string(v))
			return true
		})
		return out, err
	}
	ids, err := b.Postings(ms...)
	if err != nil {
		return nil, err
	}
	out := []string{}
	var perr error
	var p []uint32
	if ferr := b.forValues(e, func(v []byte, off uint32) bool {
		p, perr = b.postingsAt(off, math.MaxUint32, p[:0])
		if perr != nil {
			return false
		}
		if sorted.Intersects(p, ids) {
			out = append(out, string(v))
		}
		return true
	}); ferr != nil {
		return nil, ferr
	}
	return out, perr
}

// ChunkStats returns the statistics of the series' column in each chunk
// overlapping [mint, maxt], ordered by MinT, read from chunk headers without
// decoding values; a histogram column's have Kind KindHistogram or
// KindFloatHistogram and no float statistics.
func (b *Block) ChunkStats(id uint32, mint, maxt int64) ([]ChunkStat, error) {
	si, err := b.series(id, nil, nil)
	if err != nil {
		return nil, err
	}
	var out []ChunkStat
	err = b.columnsIn(si, mint, maxt, nil, func(col colView) bool {
		out = append(out, ChunkStat{MinT: col.minT, MaxT: col.maxT, Count: col.count, Kind: col.kind,
			Min: col.min, Max: col.max, Sum: col.sum, First: col.first, Last: col.last,
			HistFirst: col.hFirst, HistLast: col.hLast})
		return true
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b ChunkStat) int { return cmp.Compare(a.MinT, b.MinT) })
	return out, nil
}

// SeriesScratch holds the buffers SeriesIn reuses from one call to the next,
// and what SeriesNewest found.
type SeriesScratch struct {
	lb     labels.ScratchBuilder
	tables []memberTable
	cms    []chunkMeta

	newestT int64
	newestV float64
	newest  bool
}

// SeriesIn returns the labels of series id and whether it has samples in
// [mint, maxt] (the labels are empty when it has none), read from the index
// and chunk headers with sc's buffers: one allocation, the labels, per series in range.
func (b *Block) SeriesIn(id uint32, mint, maxt int64, sc *SeriesScratch) (labels.Labels, bool, error) {
	return b.seriesIn(id, mint, maxt, sc, false)
}

// SeriesNewest is SeriesIn that also looks for the series' newest sample in
// [mint, maxt] in the chunk statistics; sc.Newest then returns it.
func (b *Block) SeriesNewest(id uint32, mint, maxt int64, sc *SeriesScratch) (labels.Labels, bool, error) {
	return b.seriesIn(id, mint, maxt, sc, true)
}

// Newest returns the newest sample SeriesNewest found, when the statistics
// hold it: a float column ending at or before the range's end, the only one
// ending at that time (the last value is kept bit-exact, staleness markers
// included); false when the samples must be read.
func (sc *SeriesScratch) Newest() (t int64, v float64, ok bool) {
	return sc.newestT, sc.newestV, sc.newest
}

func (b *Block) seriesIn(id uint32, mint, maxt int64, sc *SeriesScratch, newest bool) (labels.Labels, bool, error) {
	sc.lb.Reset()
	sc.newest = false
	si, err := b.series(id, &sc.lb, sc.tables)
	sc.tables = si.tables
	if err != nil {
		return labels.EmptyLabels(), false, err
	}
	if !newest && b.allSampled && mint <= b.meta.MinTime && maxt >= b.meta.MaxTime-1 {
		// Version 7: every series has samples, all of them in range.
		return sc.lb.Labels(), true, nil
	}
	in, tie := false, false
	var last colView
	err = b.columnsIn(si, mint, maxt, &sc.cms, func(col colView) bool {
		switch {
		case !in || col.maxT > last.maxT:
			last, tie = col, false
		case col.maxT == last.maxT:
			tie = true
		}
		in = true
		return newest
	})
	if err != nil || !in {
		return labels.EmptyLabels(), false, err
	}
	if newest && !tie && last.kind == KindFloat && last.maxT <= maxt {
		sc.newestT, sc.newestV, sc.newest = last.maxT, last.last, true
	}
	return sc.lb.Labels(), true, nil
}

// columnsIn calls fn with the series' column in each chunk overlapping
// [mint, maxt], table by table, until fn returns false; cms, when not nil,
// is the buffer of chunk metas to reuse.
func (b *Block) columnsIn(si seriesInfo, mint, maxt int64, cms *[]chunkMeta, fn func(colView) bool) error {
	var buf []chunkMeta
	if cms != nil {
		buf = *cms
		defer func() { *cms = buf }()
	}
	for _, mt := range si.tables {
		var err error
		if buf, err = b.groupChunks(si.group, mt.table, mt.first, mt.last, buf[:0]); err != nil {
			return err
		}
		for _, cm := range buf {
			if cm.maxT < mint || cm.minT > maxt {
				continue
			}
			col, ok, err := b.memberColumn(cm.off, si.member, false)
			if err != nil {
				return err
			}
			if !ok || col.maxT < mint || col.minT > maxt {
				continue
			}
			if !fn(col) {
				return nil
			}
		}
	}
	return nil
}

// memberColumn parses the chunk at off and returns member's column in it.
func (b *Block) memberColumn(off uint64, member int, verify bool) (colView, bool, error) {
	body, _, err := b.chunkBody(off, verify)
	if err != nil {
		return colView{}, false, err
	}
	ch, err := parseChunk(body)
	if err != nil {
		return colView{}, false, fmt.Errorf("%s: chunk at %d: %w", b.chunksPath, off, err)
	}
	i := ch.find(member)
	if i < 0 {
		return colView{}, false, nil
	}
	col, err := ch.column(i)
	if err != nil {
		return colView{}, false, fmt.Errorf("%s: chunk at %d: %w", b.chunksPath, off, err)
	}
	return col, true, nil
}

// Inspect describes every group of the block: members, tables, and per column the encodings and sizes.
func (b *Block) Inspect() (Inspection, error) {
	var ins Inspection
	for g := 0; g < b.ngroups; g++ {
		key, members, tables, err := b.groupInfo(g)
		if err != nil {
			return ins, err
		}
		gi := GroupInspection{Key: key}
		for _, id := range members {
			l, err := b.Labels(id)
			if err != nil {
				return ins, err
			}
			gi.Members = append(gi.Members, l)
		}
		for _, cms := range tables {
			var ti TableInspection
			colIdx := map[int]int{}
			for _, cm := range cms {
				body, size, err := b.chunkBody(cm.off, false)
				if err != nil {
					return ins, err
				}
				ch, err := parseChunk(body)
				if err != nil {
					return ins, fmt.Errorf("%s: chunk at %d: %w", b.chunksPath, cm.off, err)
				}
				ti.Chunks++
				ti.Rows += ch.rows
				ti.Bytes += size
				if ch.regular {
					ti.Regular++
					ti.TimestampBytes += binary.PutUvarint(make([]byte, 10), uint64(ch.step)) + 1
				} else {
					ti.TimestampBytes += len(ch.tsData)
				}
				for i := 0; i < ch.ncols; i++ {
					col, err := ch.column(i)
					if err != nil {
						return ins, fmt.Errorf("%s: chunk at %d: %w", b.chunksPath, cm.off, err)
					}
					k, ok := colIdx[col.member]
					if !ok {
						k = len(ti.Columns)
						colIdx[col.member] = k
						ti.Columns = append(ti.Columns, ColumnInspection{Member: col.member, Encodings: map[string]int{}, Presence: map[string]int{}})
					}
					ci := &ti.Columns[k]
					ci.Chunks++
					ci.Samples += col.count
					ci.Bytes += col.size + ch.wm + ch.wo
					ci.Encodings[colName(&col)]++
					ci.Presence[presNames[col.presence]]++
				}
			}
			slices.SortFunc(ti.Columns, func(a, b ColumnInspection) int { return a.Member - b.Member })
			gi.Tables = append(gi.Tables, ti)
		}
		ins.Groups = append(ins.Groups, gi)
	}
	return ins, nil
}

// Verify checks every checksum of the block (index sections and TOC, chunks TOC, every chunk, and the
// exemplars and starts files' TOCs and records), parses every chunk header, exemplar and starts record,
// and checks that the index references only existing chunks.
func (b *Block) Verify() error {
	saved := b.opts.skipIndexCRC
	b.opts.skipIndexCRC = false
	err := b.openIndex()
	b.opts.skipIndexCRC = saved
	if err != nil {
		return fmt.Errorf("verify: %s: %w", b.indexPath, err)
	}
	if err := b.openChunks(); err != nil {
		return fmt.Errorf("verify: %s: %w", b.chunksPath, err)
	}
	offs := map[uint64]bool{}
	end := uint64(len(b.chunks) - 20)
	for off := uint64(8); off < end; {
		body, size, err := b.chunkBody(off, true)
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		ch, err := parseChunk(body)
		if err == nil {
			for i := 0; i < ch.ncols && err == nil; i++ {
				_, err = ch.column(i)
			}
		}
		if err != nil {
			return fmt.Errorf("verify: %s: chunk at %d: %w", b.chunksPath, off, err)
		}
		offs[off] = true
		off += uint64(size)
	}
	if n := binary.BigEndian.Uint64(b.chunks[len(b.chunks)-12:]); n != uint64(len(offs)) {
		return fmt.Errorf("verify: %s: TOC counts %d chunks, file holds %d: %w", b.chunksPath, n, len(offs), ErrCorrupt)
	}
	for g := 0; g < b.ngroups; g++ {
		_, _, tables, err := b.groupInfo(g)
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		for _, cms := range tables {
			for _, cm := range cms {
				if !offs[cm.off] {
					return fmt.Errorf("verify: %s: group %d references no chunk at %d: %w", b.indexPath, g, cm.off, ErrCorrupt)
				}
			}
		}
	}
	for id := 0; id < b.nseries; id++ {
		if _, err := b.Labels(uint32(id)); err != nil {
			return fmt.Errorf("verify: %w", err)
		}
	}
	if err := b.verifyExemplars(); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if err := b.verifyStarts(); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	return nil
}

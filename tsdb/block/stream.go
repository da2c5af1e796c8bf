package block

import (
	"fmt"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tandem-tsdb/tandem/tsdb/encoding"
)

// This file reads and writes groups chunk by chunk, for callers that cannot
// hold a group decoded (compaction of wide groups over long ranges).

// ChunkRef locates one chunk of a group's table in its block.
type ChunkRef struct {
	MinT, MaxT int64 // the timestamps of the chunk's first and last rows
	off        uint64
}

// GroupChunks is a group's members and the chunks of each of its tables, without their samples.
type GroupChunks struct {
	Key     string
	Members []labels.Labels
	Tables  [][]ChunkRef // Tables[0] is the shared table; each table's chunks in time order
}

// ReadGroupChunks reads the members and chunk lists of the group with key
// into dst, reusing its slices; ok is false when the block has no such
// group. A group has at least one (possibly empty) table.
func (b *Block) ReadGroupChunks(key string, dst *GroupChunks) (ok bool, err error) {
	id, ok, err := b.findGroup(key)
	if !ok || err != nil {
		return ok, err
	}
	_, members, tables, err := b.groupInfo(id)
	if err != nil {
		return false, err
	}
	dst.Key = key
	clear(dst.Members)
	dst.Members = dst.Members[:0]
	for _, sid := range members {
		l, err := b.Labels(sid)
		if err != nil {
			return false, err
		}
		dst.Members = append(dst.Members, l)
	}
	nt := max(len(tables), 1)
	if cap(dst.Tables) < nt {
		dst.Tables = append(dst.Tables[:cap(dst.Tables)], make([][]ChunkRef, nt-cap(dst.Tables))...)
	}
	dst.Tables = dst.Tables[:nt]
	for ti := range dst.Tables {
		dst.Tables[ti] = dst.Tables[ti][:0]
		if ti < len(tables) {
			for _, cm := range tables[ti] {
				dst.Tables[ti] = append(dst.Tables[ti], ChunkRef{MinT: cm.minT, MaxT: cm.maxT, off: cm.off})
			}
		}
	}
	return true, nil
}

// ChunkReader decodes one chunk at a time: its timestamps, and any of its
// columns on demand. It reuses its buffers; the zero value is ready to use.
type ChunkReader struct {
	ch   chunkView
	ts   []int64
	tsd  encoding.TSDecoder
	cols colDecoder
	path string
	off  uint64
}

// Reset loads chunk c of b: it checks the chunk's CRC (once per block, as
// queries do) and decodes its timestamps.
func (r *ChunkReader) Reset(b *Block, c ChunkRef) error {
	r.path, r.off = b.chunksPath, c.off
	body, _, err := b.checkedChunkBody(c.off)
	if err != nil {
		return err
	}
	if r.ch, err = parseChunk(body); err != nil {
		return fmt.Errorf("%s: chunk at %d: %w", r.path, r.off, err)
	}
	if r.ch.minT != c.MinT || r.ch.maxT != c.MaxT {
		return fmt.Errorf("%s: chunk at %d: time range [%d, %d], the index says [%d, %d]: %w",
			r.path, r.off, r.ch.minT, r.ch.maxT, c.MinT, c.MaxT, ErrCorrupt)
	}
	if r.ts, err = appendTimestamps(r.ch, r.ts[:0], &r.tsd); err != nil {
		return fmt.Errorf("%s: chunk at %d: %w", r.path, r.off, err)
	}
	return nil
}

// Timestamps returns the chunk's timestamps, one per row; valid until the next Reset.
func (r *ChunkReader) Timestamps() []int64 { return r.ts }

// NumColumns returns the number of the chunk's columns.
func (r *ChunkReader) NumColumns() int { return r.ch.ncols }

// Member returns the group member whose column is the chunk's i-th; columns are in ascending member order.
func (r *ChunkReader) Member(i int) int {
	m, _ := r.ch.dirEntry(i)
	return m
}

// Find returns the index of member's column in the chunk, or -1.
func (r *ChunkReader) Find(member int) int { return r.ch.find(member) }

// Kind returns the kind of the chunk's i-th column; a column whose header is
// damaged is reported as KindFloat here and by the error of reading it.
func (r *ChunkReader) Kind(i int) Kind {
	col, err := r.ch.column(i)
	if err != nil {
		return KindFloat
	}
	return col.kind
}

// AppendColumn appends the rows (relative to the chunk's first row) and
// values of the chunk's i-th column, a float column, to rows and vals; a
// histogram column is an error (see ReadColumn).
func (r *ChunkReader) AppendColumn(i int, rows []int32, vals []float64) ([]int32, []float64, error) {
	col, err := r.ch.column(i)
	if err == nil {
		rows, vals, err = r.cols.appendColumn(r.ch, col, 0, rows, vals)
	}
	if err != nil {
		return rows, vals, fmt.Errorf("%s: chunk at %d: %w", r.path, r.off, err)
	}
	return rows, vals, nil
}

// AppendRows appends the rows (relative to the chunk's first row) of the
// chunk's i-th column, of any kind, to rows without decoding its samples.
func (r *ChunkReader) AppendRows(i int, rows []int32) ([]int32, error) {
	col, err := r.ch.column(i)
	if err != nil {
		return rows, fmt.Errorf("%s: chunk at %d: %w", r.path, r.off, err)
	}
	return appendRows(r.ch, col, 0, rows), nil
}

// ReadColumn appends the rows (relative to the chunk's first row) and
// samples of the chunk's i-th column to c: to its Values, Histograms or
// FloatHistograms, by the column's kind (Kind); c must not hold samples of
// another kind. The histograms that c's slice holds in its capacity beyond
// its length are decoded into and reused; they must not be among its
// elements.
func (r *ChunkReader) ReadColumn(i int, c *Column) error {
	col, err := r.ch.column(i)
	if err == nil {
		err = r.cols.appendTo(r.ch, col, 0, c)
	}
	if err != nil {
		return fmt.Errorf("%s: chunk at %d: %w", r.path, r.off, err)
	}
	return nil
}

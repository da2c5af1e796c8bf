package block

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/oklog/ulid/v2"
	"github.com/prometheus/prometheus/model/labels"
)

// errInjected is returned by Write when WriteOptions.failAfter triggers.
var errInjected = errors.New("injected failure")

// GroupSource yields the groups of a block one at a time; it stops and returns yield's error if yield fails.
// The *Group passed to yield may be reused by the source after yield returns.
type GroupSource func(yield func(*Group) error) error

// Groups returns a GroupSource over a slice.
func Groups(gs []Group) GroupSource {
	return func(yield func(*Group) error) error {
		for i := range gs {
			if err := yield(&gs[i]); err != nil {
				return err
			}
		}
		return nil
	}
}

// chunkMeta locates one chunk of a table.
type chunkMeta struct {
	minT, maxT int64
	off        uint64
}

// memberTable records that a member has samples in chunks [first, last] of a table.
type memberTable struct {
	table, first, last int
}

// groupRec is what the writer keeps of a group after its chunks are written.
type groupRec struct {
	key          string
	members      []labels.Labels
	tables       [][]chunkMeta
	memberTables [][]memberTable
}

// countingWriter tracks the offset of a buffered file writer.
type countingWriter struct {
	f   *os.File
	w   *bufio.Writer
	off uint64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.off += uint64(n)
	return n, err
}

func createFile(path string) (*countingWriter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &countingWriter{f: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

// finish flushes, fsyncs and closes the file.
func (c *countingWriter) finish() error {
	if err := c.w.Flush(); err != nil {
		c.f.Close()
		return err
	}
	if err := c.f.Sync(); err != nil {
		c.f.Close()
		return err
	}
	return c.f.Close()
}

// Write writes a block covering [mint, maxt) into dir/<ulid> from the groups of src and returns its meta.
//
// Groups may come in any order and are streamed: only their labels and chunk
// locations are kept in memory. Every timestamp must lie in [mint, maxt),
// group keys and series labels must be unique, and a member's samples in
// different tables must not share a timestamp (not checked). Everything is
// written to dir/<ulid>.tmp-for-creation, fsynced, and renamed into place when
// complete; on error the temporary directory is removed, but a crash may
// leave it behind: CleanupTmp removes such leftovers and Open never sees them
// (meta.json is written last).
func Write(dir string, mint, maxt int64, src GroupSource, opts WriteOptions) (Meta, error) {
	if opts.ChunkRows <= 0 {
		opts.ChunkRows = DefaultChunkRows
	}
	if opts.MaxDecimalScale == 0 {
		opts.MaxDecimalScale = 15
	}
	if opts.Level <= 0 {
		opts.Level = 1
	}
	if opts.ULID == "" {
		opts.ULID = ulid.Make().String()
	}
	meta := Meta{ULID: opts.ULID, MinTime: mint, MaxTime: maxt, Version: FormatVersion}
	meta.Compaction.Level = opts.Level
	meta.Compaction.Sources = opts.Sources
	if len(meta.Compaction.Sources) == 0 {
		meta.Compaction.Sources = []string{opts.ULID}
	}
	if mint >= maxt {
		return meta, fmt.Errorf("write block: empty time range [%d, %d)", mint, maxt)
	}
	final := filepath.Join(dir, opts.ULID)
	tmp := final + tmpSuffix
	if err := os.RemoveAll(tmp); err != nil {
		return meta, fmt.Errorf("write block: %w", err)
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return meta, fmt.Errorf("write block: %w", err)
	}
	w := &blockWriter{dir: tmp, mint: mint, maxt: maxt, opts: opts, meta: &meta}
	w.enc.maxScale = opts.MaxDecimalScale
	if err := w.write(src); err != nil {
		if w.chunks != nil {
			w.chunks.f.Close()
		}
		if !errors.Is(err, errInjected) { // an injected failure simulates a crash: leave the debris
			os.RemoveAll(tmp)
		}
		return meta, fmt.Errorf("write block %s: %w", final, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.RemoveAll(tmp)
		return meta, fmt.Errorf("write block: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return meta, fmt.Errorf("write block %s: %w", final, err)
	}
	return meta, nil
}

// CleanupTmp removes the temporary directories that interrupted Writes left in dir.
func CleanupTmp(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("cleanup %s: %w", dir, err)
	}
	for _, e := range ents {
		if e.IsDir() && strings.HasSuffix(e.Name(), tmpSuffix) {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("cleanup %s: %w", dir, err)
			}
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// blockWriter holds the state of one Write.
type blockWriter struct {
	dir        string
	mint, maxt int64
	opts       WriteOptions
	meta       *Meta
	chunks     *countingWriter
	enc        chunkEncoder
	groups     []groupRec
	body, head []byte
	cols       []colInput
	rel        []int32
	pos        []int
}

func (w *blockWriter) write(src GroupSource) error {
	var err error
	path := filepath.Join(w.dir, ChunksFilename)
	if w.chunks, err = createFile(path); err != nil {
		return err
	}
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[:], chunksMagic)
	hdr[4] = FormatVersion
	if _, err := w.chunks.Write(hdr[:]); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := src(w.addGroup); err != nil {
		return err
	}
	var toc [20]byte
	binary.BigEndian.PutUint64(toc[0:], w.chunks.off)
	binary.BigEndian.PutUint64(toc[8:], w.meta.Stats.NumChunks)
	binary.BigEndian.PutUint32(toc[16:], crc32.Checksum(toc[:16], castagnoli))
	if _, err := w.chunks.Write(toc[:]); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := w.chunks.finish(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	w.chunks = nil
	if err := writeIndex(filepath.Join(w.dir, IndexFilename), w.groups, w.meta); err != nil {
		return err
	}
	if w.opts.Exemplars != nil {
		if err := writeExemplars(filepath.Join(w.dir, ExemplarsFilename), w.opts.Exemplars, w.mint, w.maxt, w.meta); err != nil {
			return err
		}
	}
	return writeMeta(filepath.Join(w.dir, MetaFilename), w.meta)
}

func writeMeta(path string, m *Meta) error {
	b, err := json.MarshalIndent(m, "", "\t")
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	f, err := createFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if _, err := f.Write(b); err != nil {
		f.f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.finish(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// addGroup validates a group and writes its chunks.
func (w *blockWriter) addGroup(g *Group) error {
	for ti := range g.Tables {
		if err := w.validate(g, ti); err != nil {
			return err
		}
	}
	g = realign(g)
	gr := groupRec{key: g.Key, members: make([]labels.Labels, len(g.Members))}
	for i, l := range g.Members {
		gr.members[i] = l.Copy()
	}
	gr.memberTables = make([][]memberTable, len(g.Members))
	for ti := range g.Tables {
		tb := &g.Tables[ti]
		var cms []chunkMeta
		w.pos = append(w.pos[:0], make([]int, len(tb.Columns))...)
		for r0, r1 := 0, 0; r0 < len(tb.Timestamps); r0 = r1 {
			r1 = chunkEnd(r0, len(tb.Timestamps), w.opts.ChunkRows)
			w.cols, w.rel = w.cols[:0], w.rel[:0]
			for ci := range tb.Columns {
				c := &tb.Columns[ci]
				p := w.pos[ci]
				q := p
				for q < len(c.Rows) && int(c.Rows[q]) < r1 {
					q++
				}
				w.pos[ci] = q
				if q == p {
					continue
				}
				s := len(w.rel)
				for _, r := range c.Rows[p:q] {
					w.rel = append(w.rel, r-int32(r0))
				}
				w.cols = append(w.cols, colInput{member: c.Member, rows: w.rel[s:len(w.rel):len(w.rel)], vals: c.Values[p:q]})
				w.meta.Stats.NumSamples += uint64(q - p)
			}
			if len(w.cols) == 0 {
				continue
			}
			sortColumns(w.cols)
			ts := tb.Timestamps[r0:r1]
			off, err := w.writeChunk(ts)
			if err != nil {
				return err
			}
			ci := len(cms)
			cms = append(cms, chunkMeta{minT: ts[0], maxT: ts[len(ts)-1], off: off})
			for _, c := range w.cols {
				mt := gr.memberTables[c.member]
				if n := len(mt); n > 0 && mt[n-1].table == ti {
					mt[n-1].last = ci
				} else {
					gr.memberTables[c.member] = append(mt, memberTable{table: ti, first: ci, last: ci})
				}
			}
		}
		gr.tables = append(gr.tables, cms)
	}
	w.meta.Stats.NumGroups++
	w.meta.Stats.NumSeries += uint64(len(g.Members))
	w.groups = append(w.groups, gr)
	return nil
}

// chunkEnd returns the end (exclusive) of the chunk that starts at row r0 of
// a table of n rows: chunkRows rows later, or n when fewer than a quarter of
// chunkRows would be left for a last chunk (a chunk's header, directory and
// column headers cost the same for 1 row as for chunkRows).
func chunkEnd(r0, n, chunkRows int) int {
	r1 := r0 + chunkRows
	if n-r1 < chunkRows/4 {
		return n
	}
	return r1
}

// validate checks table ti of g.
func (w *blockWriter) validate(g *Group, ti int) error {
	tb := &g.Tables[ti]
	for i, t := range tb.Timestamps {
		if t < w.mint || t >= w.maxt {
			return fmt.Errorf("group %q table %d: timestamp %d outside [%d, %d)", g.Key, ti, t, w.mint, w.maxt)
		}
		if i > 0 && t <= tb.Timestamps[i-1] {
			return fmt.Errorf("group %q table %d: timestamps not strictly increasing at row %d", g.Key, ti, i)
		}
	}
	seen := make(map[int]bool, len(tb.Columns))
	for _, c := range tb.Columns {
		if c.Member < 0 || c.Member >= len(g.Members) || seen[c.Member] {
			return fmt.Errorf("group %q table %d: bad or repeated member %d", g.Key, ti, c.Member)
		}
		seen[c.Member] = true
		if len(c.Rows) != len(c.Values) {
			return fmt.Errorf("group %q table %d member %d: %d rows but %d values", g.Key, ti, c.Member, len(c.Rows), len(c.Values))
		}
		for i, r := range c.Rows {
			if r < 0 || int(r) >= len(tb.Timestamps) || (i > 0 && r <= c.Rows[i-1]) {
				return fmt.Errorf("group %q table %d member %d: bad row %d at %d", g.Key, ti, c.Member, r, i)
			}
		}
	}
	return nil
}

// writeChunk encodes w.cols over ts and appends the chunk to the chunks file, returning its offset.
func (w *blockWriter) writeChunk(ts []int64) (uint64, error) {
	if w.opts.failAfter > 0 && w.meta.Stats.NumChunks >= uint64(w.opts.failAfter) {
		return 0, errInjected
	}
	w.body = w.enc.encode(w.body[:0], ts, w.cols)
	w.head = binary.AppendUvarint(w.head[:0], uint64(len(w.body)))
	off := w.chunks.off
	var crc [4]byte
	binary.BigEndian.PutUint32(crc[:], crc32.Checksum(w.body, castagnoli))
	for _, b := range [][]byte{w.head, w.body, crc[:]} {
		if _, err := w.chunks.Write(b); err != nil {
			return 0, fmt.Errorf("%s: %w", filepath.Join(w.dir, ChunksFilename), err)
		}
	}
	w.meta.Stats.NumChunks++
	return off, nil
}

var _ io.Writer = (*countingWriter)(nil)
var _ = math.MaxInt64

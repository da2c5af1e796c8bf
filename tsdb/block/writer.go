package block

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/oklog/ulid/v2"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/internal/fsutil"
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
	key     string
	members []labels.Labels
	tables  [][]chunkMeta
	spans   memberSpans
}

// memberSpans records which chunks of which tables each member of a group
// has samples in, in the order written. A block writer keeps it for every
// series until the index is written, so the common case (one run of chunks
// of one table) takes 12 bytes a member and no allocation of its own; the
// runs after a member's first (an unaligned member's own tables) are kept
// apart.
type memberSpans struct {
	first []memberSpan          // by member
	more  map[int][]memberTable // by member: its runs after the first
}

// memberSpan is a member's first run of chunks, first..last of a table.
type memberSpan struct {
	table1      int32 // table + 1; 0 while the member has no chunk
	first, last int32
}

func newMemberSpans(members int) memberSpans {
	return memberSpans{first: make([]memberSpan, members)}
}

// add records that member m has samples in chunk ci of table ti; chunks come
// in the order written.
func (s *memberSpans) add(m, ti, ci int) {
	f := &s.first[m]
	if f.table1 == 0 {
		*f = memberSpan{table1: int32(ti + 1), first: int32(ci), last: int32(ci)}
		return
	}
	if more := s.more[m]; len(more) > 0 {
		if l := &more[len(more)-1]; l.table == ti {
			l.last = ci
		} else {
			s.more[m] = append(more, memberTable{table: ti, first: ci, last: ci})
		}
		return
	}
	if int(f.table1) == ti+1 {
		f.last = int32(ci)
		return
	}
	if s.more == nil {
		s.more = map[int][]memberTable{}
	}
	s.more[m] = []memberTable{{table: ti, first: ci, last: ci}}
}

// appendTo appends member m's runs to dst.
func (s *memberSpans) appendTo(dst []memberTable, m int) []memberTable {
	f := s.first[m]
	if f.table1 == 0 {
		return dst
	}
	dst = append(dst, memberTable{table: int(f.table1) - 1, first: int(f.first), last: int(f.last)})
	return append(dst, s.more[m]...)
}

// sampled reports whether member m has samples in some chunk.
func (s *memberSpans) sampled(m int) bool { return s.first[m].table1 != 0 }

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

// testHookFS, when set by a test, observes the file system operations that
// make a block durable, in order: "sync" of a file, "syncdir" of a directory,
// "rename" (path is the destination).
var testHookFS func(op, path string)

func hookFS(op, path string) {
	if testHookFS != nil {
		testHookFS(op, path)
	}
}

// finish flushes, fsyncs and closes the file.
func (c *countingWriter) finish() error {
	if err := c.w.Flush(); err != nil {
		c.f.Close()
		return err
	}
	hookFS("sync", c.f.Name())
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
// written to dir/<ulid>.tmp-for-creation; every file and then that directory
// are fsynced, it is renamed into place and dir is fsynced, as Prometheus
// does. On error the temporary directory is removed, but a crash may leave
// it behind: CleanupTmp removes such leftovers and Open never sees them
// (meta.json is written last).
func Write(dir string, mint, maxt int64, src GroupSource, opts WriteOptions) (Meta, error) {
	return WriteStream(dir, mint, maxt, func(gw *GroupWriter) error { return src(gw.addGroup) }, opts)
}

// WriteStream is Write for a source that writes its groups through a
// GroupWriter, chunk by chunk, instead of yielding them whole: memory then
// holds one chunk's encoding, not a group's samples.
func WriteStream(dir string, mint, maxt int64, src func(*GroupWriter) error, opts WriteOptions) (Meta, error) {
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
	err := w.write(src)
	if err == nil {
		err = syncDir(tmp) // the files' directory entries, before the directory gets its name
	}
	if err != nil {
		if w.chunks != nil {
			w.chunks.f.Close()
		}
		if !errors.Is(err, errInjected) { // an injected failure simulates a crash: leave the debris
			os.RemoveAll(tmp)
		}
		return meta, fmt.Errorf("write block %s: %w", final, err)
	}
	hookFS("rename", final)
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

// syncDir fsyncs dir (fsutil.SyncDir), observed by testHookFS as "syncdir".
func syncDir(dir string) error {
	hookFS("syncdir", dir)
	return fsutil.SyncDir(dir)
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
	frame      []byte // a chunk's length or CRC
}

func (w *blockWriter) write(src func(*GroupWriter) error) error {
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
	gw := &GroupWriter{w: w}
	if err := src(gw); err != nil {
		return err
	}
	if gw.gr != nil {
		return fmt.Errorf("group %q not ended", gw.gr.key)
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
	if w.opts.Starts != nil {
		if err := writeStarts(filepath.Join(w.dir, StartsFilename), w.opts.Starts, w.mint, w.maxt, w.meta); err != nil {
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

// writeChunk appends the chunk w.enc holds (begun, columns added) to the chunks file and returns its offset.
func (w *blockWriter) writeChunk() (uint64, error) {
	if w.opts.failAfter > 0 && w.meta.Stats.NumChunks >= uint64(w.opts.failAfter) {
		return 0, errInjected
	}
	w.enc.finish()
	head, area := w.enc.head, w.enc.area
	off := w.chunks.off
	w.frame = binary.AppendUvarint(w.frame[:0], uint64(len(head)+len(area)))
	_, err := w.chunks.Write(w.frame)
	if err == nil {
		_, err = w.chunks.Write(head)
	}
	if err == nil {
		_, err = w.chunks.Write(area)
	}
	if err == nil {
		w.frame = binary.BigEndian.AppendUint32(w.frame[:0], crc32.Update(crc32.Checksum(head, castagnoli), castagnoli, area))
		_, err = w.chunks.Write(w.frame)
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Join(w.dir, ChunksFilename), err)
	}
	w.meta.Stats.NumChunks++
	return off, nil
}

var _ io.Writer = (*countingWriter)(nil)

// Package block implements tandem's immutable columnar blocks on disk: a
// directory holding meta.json, an index file, a chunks file and, when the
// block has them, an exemplars file and a starts file (start timestamps),
// written once by Write and read
// through a memory map by Open. The byte format is described in
// docs/format/block.md.
package block

import (
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
)

// File names inside a block directory.
const (
	MetaFilename   = "meta.json"
	IndexFilename  = "index"
	ChunksFilename = "chunks"
)

// FormatVersion is the version written to meta.json and to each binary file.
// Version 2 added integer and derived column stats (stat mask bits 4 and 5)
// and order-0 decimal streams; version 3 added stepped decimal residuals
// (bit 7 of the order byte); version 4 Rice-coded decimal residuals (bit 6);
// version 5 native histogram columns (column types 4 and 5); version 6 added
// the optional starts file; version 7 made the index and column directories
// smaller (series records found by stride and length, postings runs, column
// directories without members when they are 0..n-1, column stats relative
// to the first value) and added patched decimal streams (bit 5 of the order
// byte). Older blocks are read as they are, and a tandem
// that knows an older version refuses newer blocks.
const FormatVersion = 7

// minFormatVersion is the oldest version this code reads.
const minFormatVersion = 1

// readableVersion reports whether files of version v can be read.
func readableVersion(v int) bool { return v >= minFormatVersion && v <= FormatVersion }

// DefaultChunkRows is the default maximum number of rows per chunk: three
// hours at 15 s. A chunk's header, column directory and per-column stats
// cost the same whatever its rows, and compacted blocks (6 h and longer)
// hold most data; a query decodes at most one partial chunk at each end.
const DefaultChunkRows = 720

// tmpSuffix marks a block directory that is still being written.
const tmpSuffix = ".tmp-for-creation"

// Magic numbers of the binary files.
const (
	indexMagic  = 0x544E4449 // "TNDI"
	chunksMagic = 0x544E4443 // "TNDC"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by every error that reports malformed block data.
var ErrCorrupt = errors.New("block: corrupt data")

// Column is one member's samples in a table: the rows where the member has a
// sample and the samples, of one kind: exactly one of Values, Histograms and
// FloatHistograms has len(Rows) entries, the others none.
type Column struct {
	Member int       // index into Group.Members
	Rows   []int32   // indices into Table.Timestamps where the member has a sample, strictly ascending
	Values []float64 // float samples; every bit pattern round-trips
	// Histograms are integer native histograms (non-nil); every field
	// round-trips bit for bit, except that CounterResetHint keeps its two
	// low bits (every defined hint).
	Histograms []*histogram.Histogram
	// FloatHistograms are float native histograms (non-nil), kept as Histograms are.
	FloatHistograms []*histogram.FloatHistogram
}

// Kind is the kind of the samples of a column.
type Kind uint8

// The kinds of columns.
const (
	KindFloat          Kind = iota // float64 values (Column.Values)
	KindHistogram                  // integer native histograms (Column.Histograms)
	KindFloatHistogram             // float native histograms (Column.FloatHistograms)
)

var kindNames = [...]string{KindFloat: "float", KindHistogram: "histogram", KindFloatHistogram: "floathistogram"}

// String returns the kind's name: float, histogram or floathistogram.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Kind returns the kind of the column's samples: that of its non-empty
// sample slice, KindFloat when all are empty.
func (c *Column) Kind() Kind {
	switch {
	case len(c.Histograms) > 0:
		return KindHistogram
	case len(c.FloatHistograms) > 0:
		return KindFloatHistogram
	}
	return KindFloat
}

// Table is a set of columns sharing one timestamp column.
type Table struct {
	Timestamps []int64  // strictly increasing
	Columns    []Column // at most one per member
}

// Group is the input unit of Write: the series of one group and their tables.
type Group struct {
	Key     string          // the group's identity, unique within a block
	Members []labels.Labels // the group's series, any order, unique across the block
	// Tables[0] is the shared (aligned) table; later tables each hold one column
	// (an unaligned member). A member may appear in several tables; its samples
	// never share a timestamp across tables, but time ranges may interleave.
	Tables []Table
}

// Meta is the content of meta.json.
type Meta struct {
	ULID       string         `json:"ulid"`
	MinTime    int64          `json:"minTime"` // inclusive
	MaxTime    int64          `json:"maxTime"` // exclusive
	Stats      MetaStats      `json:"stats"`
	Compaction MetaCompaction `json:"compaction"`
	Version    int            `json:"version"`
}

// MetaStats counts what a block holds.
type MetaStats struct {
	NumSamples uint64 `json:"numSamples"`
	NumSeries  uint64 `json:"numSeries"`
	NumGroups  uint64 `json:"numGroups"`
	NumChunks  uint64 `json:"numChunks"`
	// NumExemplars counts the exemplars of the exemplars file (absent when 0).
	NumExemplars uint64 `json:"numExemplars,omitempty"`
	// NumStartSeries counts the series of the starts file (absent when 0).
	NumStartSeries uint64 `json:"numStartSeries,omitempty"`
}

// MetaCompaction records how a block was produced.
type MetaCompaction struct {
	Level   int      `json:"level"`
	Sources []string `json:"sources,omitempty"`
}

// WriteOptions configures Write.
type WriteOptions struct {
	ChunkRows       int      // maximum rows per chunk; default DefaultChunkRows
	MaxDecimalScale int      // largest decimal scale tried for value columns; default 15 (encoding.MaxDecimalScale), negative disables the decimal codec
	Level           int      // Meta.Compaction.Level; default 1
	Sources         []string // Meta.Compaction.Sources; default the new block's ULID
	ULID            string   // the block's ULID; default a new one
	// Exemplars, when set, yields the exemplars written to the block's
	// exemplars file; their timestamps must lie in [mint, maxt). No file is
	// written when it yields none.
	Exemplars ExemplarSource
	// Starts, when set, yields the start timestamps written to the block's
	// starts file; their runs must lie in [mint, maxt). Series without a
	// start timestamp are skipped, and no file is written when none is left.
	Starts StartSource
	// KeepLabels says the members' labels a source yields, and the slice
	// that holds them, stay valid and unchanged after the write (a head's
	// series labels in a slice made for the write): the writer then keeps
	// them until it writes the index instead of copying them, as it must
	// when they point into buffers the source reuses.
	KeepLabels bool

	// failAfter, when > 0, makes Write fail after writing that many chunks (tests of crash safety).
	failAfter int
}

// ChunkStat summarises one member's column in one chunk, read from the chunk's header.
//
// Count includes every sample. For a float column (Kind KindFloat), First
// and Last are the first and last values, bit-exact (a staleness marker stays
// one). Min, Max and Sum are computed over the samples that are not NaN (so
// staleness markers and other NaNs are excluded), in time order with float64
// addition; when every sample is NaN they are NaN. Min and Max keep the
// earliest of equal values (-0 vs +0). A histogram column has no float
// statistics (they are NaN): HistFirst and HistLast describe its first and
// last histograms instead.
type ChunkStat struct {
	MinT, MaxT                 int64 // the member's first and last timestamp in the chunk
	Count                      int
	Kind                       Kind // the column's kind: check it before reading the float statistics
	Min, Max, Sum, First, Last float64
	HistFirst, HistLast        HistStat // histogram columns only
}

// HistStat is the Count and Sum of one native histogram, bit-exact (an
// integer histogram's Count as a float64).
type HistStat struct {
	Count, Sum float64
}

// Inspection describes a block's groups and how their columns are encoded.
type Inspection struct {
	Groups []GroupInspection
}

// GroupInspection describes one group.
type GroupInspection struct {
	Key     string
	Members []labels.Labels
	Tables  []TableInspection
}

// TableInspection describes one table of a group.
type TableInspection struct {
	Chunks         int
	Rows           int
	Bytes          int // chunk bytes on disk, framing included
	TimestampBytes int // encoded timestamp columns
	Regular        int // chunks whose timestamp column is regular (start, step)
	Columns        []ColumnInspection
}

// ColumnInspection describes one member's column in a table, summed over chunks.
type ColumnInspection struct {
	Member    int
	Chunks    int
	Samples   int
	Bytes     int            // column header and data
	Encodings map[string]int // chunks per value encoding name (const, xor, decimal), or kind for histogram columns (histogram, floathistogram)
	Presence  map[string]int // chunks per presence kind name
}

package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
)

// TypeCommit is the type byte of a Commit record without exemplars.
const TypeCommit byte = 1

// TypeCommitExemplars is the type byte of a Commit record followed by an
// exemplars section (at least one exemplar).
const TypeCommitExemplars byte = 2

// TypeCommitCompact and TypeCommitCompactExemplars are TypeCommit and
// TypeCommitExemplars with the compact samples section (integer values as
// varints, deltas from the previous sample): what Encode writes. The older
// types are still decoded.
const (
	TypeCommitCompact          byte = 3
	TypeCommitCompactExemplars byte = 4
)

// Minimum encoded sizes, used to bound counts before allocating.
const (
	minSeriesSize   = 2  // uvarint ref + uvarint nlabels
	minLabelSize    = 2  // two empty strs
	minSampleSize   = 10 // two varints + 8 value bytes
	minCompactSize  = 3  // two varints + a one-byte integer value
	minMetadataSize = 4  // four empty strs
)

// ErrMalformed is wrapped by every error Decode returns for invalid input.
var ErrMalformed = errors.New("malformed record")

// RefSeries is a series first created by a write, with the reference its samples use.
type RefSeries struct {
	Ref    uint64
	Labels labels.Labels
}

// RefSample is one float sample of the series identified by Ref.
type RefSample struct {
	Ref uint64
	T   int64
	V   float64
}

// RefHistogram is one native histogram sample of the series identified by
// Ref: exactly one of H (integer counts) and FH (float counts) is set
// (Encode panics otherwise).
type RefHistogram struct {
	Ref uint64
	T   int64
	H   *histogram.Histogram
	FH  *histogram.FloatHistogram
}

// Metadata describes a metric family (type, help and unit).
type Metadata struct {
	Metric, Type, Help, Unit string
}

// RefExemplar is one exemplar of the series identified by Ref.
type RefExemplar struct {
	Ref    uint64
	T      int64
	V      float64
	Labels labels.Labels
}

// Commit is the content of one record: series first created by this write, its samples, metric metadata, exemplars, histograms and start timestamps.
type Commit struct {
	Series    []RefSeries
	Samples   []RefSample
	Metadata  []Metadata
	Exemplars []RefExemplar
	// Histograms are native histogram samples. Decode allocates each
	// histogram afresh, so the pointers may be kept.
	Histograms []RefHistogram
	// Starts are the start timestamps of samples and histograms of this
	// commit, only those with ST != 0, in the caller's order (normally the
	// samples', then the histograms'). Encode panics on an ST of 0.
	Starts []RefStart

	builder     labels.ScratchBuilder
	builderInit bool
}

// Reset empties c, keeping the capacity of its slices for reuse.
func (c *Commit) Reset() {
	clear(c.Series) // drop label references so they can be collected
	clear(c.Metadata)
	clear(c.Exemplars)
	clear(c.Histograms)
	c.Series = c.Series[:0]
	c.Samples = c.Samples[:0]
	c.Metadata = c.Metadata[:0]
	c.Exemplars = c.Exemplars[:0]
	c.Histograms = c.Histograms[:0]
	c.Starts = c.Starts[:0]
}

// Encode appends the binary record to buf and returns it: type
// TypeCommitStarts when c has start timestamps, else TypeCommitHistograms
// when it has histograms, otherwise TypeCommitCompact or
// TypeCommitCompactExemplars.
func (c *Commit) Encode(buf []byte) []byte {
	starts := len(c.Starts) > 0
	hist := len(c.Histograms) > 0
	if starts {
		buf = append(buf, TypeCommitStarts)
	} else if hist {
		buf = append(buf, TypeCommitHistograms)
	} else if len(c.Exemplars) > 0 {
		buf = append(buf, TypeCommitCompactExemplars)
	} else {
		buf = append(buf, TypeCommitCompact)
	}

	buf = binary.AppendUvarint(buf, uint64(len(c.Series)))
	for i := range c.Series {
		s := &c.Series[i]
		buf = binary.AppendUvarint(buf, s.Ref)
		buf = binary.AppendUvarint(buf, uint64(s.Labels.Len()))
		s.Labels.Range(func(l labels.Label) {
			buf = appendString(buf, l.Name)
			buf = appendString(buf, l.Value)
		})
	}

	buf = binary.AppendUvarint(buf, uint64(len(c.Samples)))
	var prevRef uint64
	var prevT int64
	for _, s := range c.Samples {
		buf = binary.AppendVarint(buf, int64(s.Ref-prevRef))
		buf = binary.AppendVarint(buf, s.T-prevT)
		if m, ok := walInt(s.V); ok {
			buf = binary.AppendUvarint(buf, uint64(m<<1^m>>63)<<1|1)
		} else {
			buf = binary.LittleEndian.AppendUint64(append(buf, 0), math.Float64bits(s.V))
		}
		prevRef, prevT = s.Ref, s.T
	}

	buf = binary.AppendUvarint(buf, uint64(len(c.Metadata)))
	for _, m := range c.Metadata {
		buf = appendString(buf, m.Metric)
		buf = appendString(buf, m.Type)
		buf = appendString(buf, m.Help)
		buf = appendString(buf, m.Unit)
	}
	if len(c.Exemplars) > 0 || hist || starts {
		buf = binary.AppendUvarint(buf, uint64(len(c.Exemplars)))
		for i := range c.Exemplars {
			e := &c.Exemplars[i]
			buf = binary.AppendUvarint(buf, e.Ref)
			buf = binary.AppendVarint(buf, e.T)
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(e.V))
			buf = binary.AppendUvarint(buf, uint64(e.Labels.Len()))
			e.Labels.Range(func(l labels.Label) {
				buf = appendString(buf, l.Name)
				buf = appendString(buf, l.Value)
			})
		}
	}
	if hist || starts {
		buf = c.appendHistograms(buf)
	}
	if starts {
		buf = c.appendStarts(buf)
	}
	return buf
}

// walInt returns v as an integer when the compact samples section stores
// it as one: an integer of magnitude below 2^53 (exact in a float64), not -0.
func walInt(v float64) (int64, bool) {
	m := int64(v) // NaN, ±Inf and |v| >= 2^63 give a value that converts back to another
	if float64(m) != v || m <= -1<<53 || m >= 1<<53 || m == 0 && math.Signbit(v) {
		return 0, false
	}
	return m, true
}

func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// decoder reads from a record, remembering the first error.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d", ErrMalformed, what, d.off)
	}
}

func (d *decoder) remaining() int { return len(d.b) - d.off }

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, ok := d.uvarintOK()
	if !ok {
		d.fail("bad, overlong or truncated uvarint " + what)
	}
	return v
}

// uvarintOK reads a minimal uvarint, reporting whether there was one.
func (d *decoder) uvarintOK() (uint64, bool) {
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 || (n > 1 && d.b[d.off+n-1] == 0) {
		return 0, false
	}
	d.off += n
	return v, true
}

func (d *decoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 || (n > 1 && d.b[d.off+n-1] == 0) {
		d.fail("bad, overlong or truncated varint " + what)
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) float() float64 { return d.f64("sample value") }

// f64 reads 8 bytes of IEEE-754 bits, little-endian.
func (d *decoder) f64(what string) float64 {
	if d.err != nil {
		return 0
	}
	if d.remaining() < 8 {
		d.fail("truncated " + what)
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b[d.off:]))
	d.off += 8
	return v
}

// bytes returns a length-prefixed byte string aliasing the record.
func (d *decoder) bytes(what string) []byte {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(d.remaining()) {
		d.fail(what + " longer than record")
		return nil
	}
	s := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return s
}

// count reads a uvarint element count and checks that count elements of at
// least minSize bytes each fit in the rest of the record.
func (d *decoder) count(what string, minSize int) int {
	if d.err != nil {
		return 0
	}
	n, ok := d.uvarintOK()
	if !ok {
		d.fail("bad, overlong or truncated uvarint " + what + " count") // not built unless failing: it would allocate
		return 0
	}
	if n > uint64(d.remaining()/minSize) {
		d.fail(fmt.Sprintf("%s count %d exceeds record size", what, n))
		return 0
	}
	return int(n)
}

// yolo views b as a string without copying; the result is only valid while b is.
func yolo(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// Decode parses rec into c, reusing c's slices; returns a clear error (never panics, never allocates more than O(len(rec))) on malformed input.
// The decoded Commit does not reference rec, so rec may be reused afterwards.
// On error c holds partial, unspecified content.
func Decode(rec []byte, c *Commit) error {
	c.Reset()
	if len(rec) == 0 {
		return fmt.Errorf("%w: empty record", ErrMalformed)
	}
	typ := rec[0]
	if typ < TypeCommit || typ > TypeCommitStarts {
		return fmt.Errorf("%w: unknown record type %d", ErrMalformed, typ)
	}
	d := decoder{b: rec, off: 1}

	if err := c.decodeSeries(&d); err != nil {
		return err
	}
	if typ >= TypeCommitCompact {
		c.decodeCompactSamples(&d)
	} else {
		c.decodeSamples(&d)
	}
	c.decodeMetadata(&d)
	switch typ {
	case TypeCommitExemplars, TypeCommitCompactExemplars:
		c.decodeExemplars(&d, false)
	case TypeCommitHistograms:
		c.decodeExemplars(&d, true)
		c.decodeHistograms(&d, false)
	case TypeCommitStarts:
		c.decodeExemplars(&d, true)
		c.decodeHistograms(&d, true)
		c.decodeStarts(&d)
	}
	if d.err != nil {
		return d.err
	}
	if d.remaining() != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, d.remaining())
	}
	return nil
}

func (c *Commit) decodeSeries(d *decoder) error {
	n := d.count("series", minSeriesSize)
	if d.err != nil {
		return d.err
	}
	c.Series = grow(c.Series, n)
	if n == 0 {
		return nil
	}
	if !c.builderInit {
		c.builder = labels.NewScratchBuilder(8)
		c.builderInit = true
	}
	b := &c.builder
	// Strings handed to the builder alias rec; the builder copies them.
	b.SetUnsafeAdd(true)
	for i := range c.Series {
		ref := d.uvarint("series ref")
		nl := d.count("label", minLabelSize)
		if d.err != nil {
			return d.err
		}
		b.Reset()
		var prev []byte
		for j := 0; j < nl; j++ {
			name := d.bytes("label name")
			value := d.bytes("label value")
			if d.err != nil {
				return d.err
			}
			if j > 0 && string(name) <= string(prev) {
				d.fail("label names not strictly increasing")
				return d.err
			}
			prev = name
			b.Add(yolo(name), yolo(value))
		}
		c.Series[i] = RefSeries{Ref: ref, Labels: b.Labels()}
	}
	return nil
}

// decodeExemplars reads an exemplars section; only the histograms and
// starts types allow it to be empty.
func (c *Commit) decodeExemplars(d *decoder, mayBeEmpty bool) {
	n := d.count("exemplar", minSampleSize+1)
	if d.err != nil {
		return
	}
	if n == 0 {
		if !mayBeEmpty {
			d.fail("exemplars record without exemplars")
		}
		return
	}
	c.Exemplars = grow(c.Exemplars, n)
	if !c.builderInit {
		c.builder = labels.NewScratchBuilder(8)
		c.builderInit = true
	}
	b := &c.builder
	b.SetUnsafeAdd(true)
	for i := 0; i < n && d.err == nil; i++ {
		ref := d.uvarint("exemplar ref")
		t := d.varint("exemplar timestamp")
		v := d.float()
		nl := d.count("exemplar label", minLabelSize)
		if d.err != nil {
			return
		}
		b.Reset()
		var prev []byte
		for j := 0; j < nl; j++ {
			name := d.bytes("exemplar label name")
			value := d.bytes("exemplar label value")
			if d.err != nil {
				return
			}
			if j > 0 && string(name) <= string(prev) {
				d.fail("exemplar label names not strictly increasing")
				return
			}
			prev = name
			b.Add(yolo(name), yolo(value))
		}
		c.Exemplars[i] = RefExemplar{Ref: ref, T: t, V: v, Labels: b.Labels()}
	}
}

func (c *Commit) decodeSamples(d *decoder) {
	n := d.count("sample", minSampleSize)
	if d.err != nil {
		return
	}
	c.Samples = grow(c.Samples, n)
	if n == 0 {
		return
	}
	ref0 := d.uvarint("first sample ref")
	t0 := d.varint("first sample timestamp")
	c.Samples[0] = RefSample{Ref: ref0, T: t0, V: d.float()}
	for i := 1; i < n && d.err == nil; i++ {
		dr := d.varint("sample ref delta")
		dt := d.varint("sample timestamp delta")
		c.Samples[i] = RefSample{Ref: ref0 + uint64(dr), T: t0 + dt, V: d.float()}
	}
}

// decodeCompactSamples reads the samples section of the compact types.
func (c *Commit) decodeCompactSamples(d *decoder) {
	n := d.count("sample", minCompactSize)
	if d.err != nil {
		return
	}
	c.Samples = grow(c.Samples, n)
	var prevRef uint64
	var prevT int64
	for i := 0; i < n && d.err == nil; i++ {
		ref := prevRef + uint64(d.varint("sample ref delta"))
		t := prevT + d.varint("sample timestamp delta")
		var v float64
		switch vh := d.uvarint("sample value"); {
		case d.err != nil:
		case vh&1 == 1:
			z := vh >> 1
			m := int64(z>>1) ^ -int64(z&1)
			if !(m > -1<<53 && m < 1<<53) {
				d.fail("integer sample value out of range")
			}
			v = float64(m)
		case vh == 0:
			if v = d.float(); d.err == nil {
				if _, isInt := walInt(v); isInt {
					d.fail("integer sample value stored as a float") // one encoding per commit
				}
			}
		default:
			d.fail("bad sample value kind")
		}
		c.Samples[i] = RefSample{Ref: ref, T: t, V: v}
		prevRef, prevT = ref, t
	}
}

func (c *Commit) decodeMetadata(d *decoder) {
	n := d.count("metadata", minMetadataSize)
	if d.err != nil {
		return
	}
	c.Metadata = grow(c.Metadata, n)
	if n == 0 {
		return
	}
	// Copy the rest of the record once; metadata strings are substrings of it.
	start := d.off
	all := string(d.b[start:])
	str := func(what string) string {
		b := d.bytes(what)
		if d.err != nil {
			return ""
		}
		s := d.off - len(b) - start
		return all[s : s+len(b)]
	}
	for i := 0; i < n && d.err == nil; i++ {
		c.Metadata[i] = Metadata{
			Metric: str("metadata metric"),
			Type:   str("metadata type"),
			Help:   str("metadata help"),
			Unit:   str("metadata unit"),
		}
	}
}

// grow returns s resized to n elements, reusing its backing array when possible.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

package wal

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
)

const resyncWindow = 64 << 10

// replayBudget bounds the bytes replay checksums in a segment of size bytes
// while it searches for valid frames after damage: 16 per byte of the
// segment, at least 64 MiB, at most 1 GiB (a fraction of a second).
func replayBudget(size int64) int64 { return min(max(16*size, 64<<20), 1<<30) }

// repairBudget is Repair's bound, 64 times larger.
func repairBudget(size int64) int64 { return 64 * replayBudget(size) }

// Damage is a run of bytes in a segment that holds no valid frame.
type Damage struct {
	Offset int64 // where the run starts
	Bytes  int64 // its length
	// Records is the number of records known to be lost in it: 1 when the
	// run is one frame whose header still gives its length, else -1
	// (unknown: at least one).
	Records int
	// Tail is set when no valid frame follows: the run ends the segment.
	Tail bool
	// Incomplete is set when the search for a valid frame gave up (work
	// bound): the rest of the segment was not searched and may hold records.
	Incomplete bool
	Err        error // why the frame at Offset is bad
}

// lost returns the records lost, counting an unknown number as one.
func (d Damage) lost() int { return max(d.Records, 1) }

// replayer holds the buffers reused across segments and records.
type replayer struct {
	br  *bufio.Reader
	src offReader
	hdr [headerSize]byte
	buf []byte

	// Used while resynchronising after damage.
	at      io.ReaderAt
	win     []byte // window of the segment at winOff
	winOff  int64
	small   [headerSize]byte
	scratch []byte
	budget  int64                  // bytes that may still be checksummed in this segment
	limit   func(size int64) int64 // budget of a segment of size bytes
}

func newReplayer(bufSize int, budget func(size int64) int64) *replayer {
	return &replayer{br: bufio.NewReaderSize(nil, bufSize), limit: budget}
}

// offReader reads an io.ReaderAt sequentially from off up to end.
type offReader struct {
	r        io.ReaderAt
	off, end int64
}

func (o *offReader) Read(p []byte) (int, error) {
	if o.off >= o.end {
		return 0, io.EOF
	}
	if rem := o.end - o.off; int64(len(p)) > rem {
		p = p[:rem]
	}
	n, err := o.r.ReadAt(p, o.off)
	o.off += int64(n)
	if err == io.EOF && n == len(p) {
		err = nil
	}
	return n, err
}

// scan reads the frames of a segment of size bytes from src and calls fn with
// the offset and payload of each valid one. At a bad frame it searches
// forward for the next valid one and goes on from there (with stop set it
// returns at the first bad frame instead, without searching). It returns the
// damaged runs found, in order; err reports I/O errors and errors of fn.
func (r *replayer) scan(src io.ReaderAt, size int64, stop bool, fn func(off int64, rec []byte) error) (damage []Damage, err error) {
	r.at, r.win, r.budget = src, r.win[:0], r.limit(size)
	r.seek(0, size)
	for off := int64(0); off < size; {
		bad, err := r.next(size - off)
		if err != nil {
			return damage, fmt.Errorf("read at offset %d: %w", off, err)
		}
		if bad == nil {
			if err := fn(off, r.buf); err != nil {
				return damage, fmt.Errorf("record at offset %d: %w", off, err)
			}
			off += headerSize + int64(len(r.buf))
			continue
		}
		if stop {
			return append(damage, Damage{Offset: off, Bytes: size - off, Records: -1, Err: bad}), nil
		}
		d, err := r.resync(off, size, bad)
		if err != nil {
			return damage, fmt.Errorf("search for a valid frame after offset %d: %w", off, err)
		}
		damage = append(damage, d)
		off += d.Bytes
		r.seek(off, size)
	}
	return damage, nil
}

func (r *replayer) seek(off, size int64) {
	r.src = offReader{r: r.at, off: off, end: size}
	r.br.Reset(&r.src)
}

// next reads one frame into r.buf, given the bytes left in the segment. It
// returns a non-nil bad for a torn or corrupt frame, and err for I/O errors.
func (r *replayer) next(remaining int64) (bad, err error) {
	if remaining < headerSize {
		return fmt.Errorf("torn frame header (%d bytes)", remaining), nil
	}
	if _, err := io.ReadFull(r.br, r.hdr[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(r.hdr[0:4])
	if int64(n) > remaining-headerSize {
		return fmt.Errorf("frame length %d exceeds the %d bytes left", n, remaining-headerSize), nil
	}
	r.buf = slices.Grow(r.buf[:0], int(n))[:n]
	if _, err := io.ReadFull(r.br, r.buf); err != nil {
		return nil, err
	}
	crc := crc32.Update(crc32.Update(0, castagnoli, r.hdr[0:4]), castagnoli, r.buf)
	if want := binary.LittleEndian.Uint32(r.hdr[4:8]); crc != want {
		return fmt.Errorf("checksum mismatch (stored %#08x, computed %#08x)", want, crc), nil
	}
	return nil, nil
}

// resync finds where valid frames resume after the bad frame at offset bad.
// A frame found there must be followed by another valid frame or end the
// segment exactly, so that a false match inside damaged bytes would take two
// CRC-32C collisions. First it tries the bad frame's own length (only its
// payload damaged), then every offset after it, within the work budget.
func (r *replayer) resync(bad, size int64, why error) (Damage, error) {
	d := Damage{Offset: bad, Records: -1, Err: why}
	next := int64(-1)
	n, crc, ok, err := r.header(bad, size, false)
	if err != nil {
		return d, err
	}
	if ok && bad+headerSize+n < size {
		if found, err := r.validChain(bad+headerSize+n, size); err != nil {
			return d, err
		} else if found {
			next = bad + headerSize + n
		}
	}
	for o := bad + 1; next < 0 && o+headerSize <= size; o++ {
		if r.budget <= 0 {
			d.Incomplete = true
			break
		}
		found, err := r.validChain(o, size)
		if err != nil {
			return d, err
		}
		if found {
			next = o
		}
	}
	if next < 0 {
		next, d.Tail = size, true
	}
	d.Bytes = next - bad
	if ok && (n != 0 || crc != 0) && bad+headerSize+n == next {
		d.Records = 1
	}
	return d, nil
}

// validChain reports whether a valid frame starts at o and is followed by
// another valid frame or by the end of the segment.
func (r *replayer) validChain(o, size int64) (bool, error) {
	n, crc, ok, err := r.header(o, size, true)
	if err != nil || !ok {
		return false, err
	}
	e := o + headerSize + n
	var (
		m    int64
		mcrc uint32
	)
	if e < size {
		// Cheap test of the successor's length before any checksum.
		if m, mcrc, ok, err = r.header(e, size, false); err != nil || !ok {
			return false, err
		}
	}
	if ok, err := r.frameOK(o, n, crc); err != nil || !ok {
		return false, err
	}
	if e == size {
		return true, nil
	}
	return r.frameOK(e, m, mcrc)
}

// header reads the frame header at o; ok is false when it does not fit or
// its length runs past the end. window reads through the resync window
// (sequential offsets); otherwise a single small read is made.
func (r *replayer) header(o, size int64, window bool) (n int64, crc uint32, ok bool, err error) {
	if o+headerSize > size {
		return 0, 0, false, nil
	}
	var h []byte
	if window || r.inWindow(o, headerSize) {
		if h, err = r.window(o, size); err != nil {
			return 0, 0, false, err
		}
	} else {
		if _, err := r.at.ReadAt(r.small[:], o); err != nil {
			return 0, 0, false, err
		}
		h = r.small[:]
	}
	n = int64(binary.LittleEndian.Uint32(h[0:4]))
	return n, binary.LittleEndian.Uint32(h[4:8]), n <= size-o-headerSize, nil
}

func (r *replayer) inWindow(o, k int64) bool {
	return o >= r.winOff && o+k <= r.winOff+int64(len(r.win))
}

// window returns the header bytes at o from the window, refilled at o if needed.
func (r *replayer) window(o, size int64) ([]byte, error) {
	if !r.inWindow(o, headerSize) {
		if cap(r.win) < resyncWindow {
			r.win = make([]byte, resyncWindow)
		}
		r.win = r.win[:min(resyncWindow, size-o)]
		if _, err := r.at.ReadAt(r.win, o); err != nil {
			r.win = r.win[:0]
			return nil, err
		}
		r.winOff = o
	}
	return r.win[o-r.winOff : o-r.winOff+headerSize], nil
}

// frameOK checks the CRC of the n-byte frame at o against crc.
func (r *replayer) frameOK(o, n int64, crc uint32) (bool, error) {
	r.budget -= n + 4
	var lb [4]byte
	binary.LittleEndian.PutUint32(lb[:], uint32(n))
	c := crc32.Update(0, castagnoli, lb[:])
	p, end := o+headerSize, o+headerSize+n
	if r.inWindow(p, n) {
		return crc32.Update(c, castagnoli, r.win[p-r.winOff:end-r.winOff]) == crc, nil
	}
	if r.scratch == nil {
		r.scratch = make([]byte, resyncWindow)
	}
	for p < end {
		b := r.scratch[:min(int64(len(r.scratch)), end-p)]
		if _, err := r.at.ReadAt(b, p); err != nil {
			return false, err
		}
		c = crc32.Update(c, castagnoli, b)
		p += int64(len(b))
	}
	return c == crc, nil
}

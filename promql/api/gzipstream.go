package api

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/flate"
)

// A gzipStream writes one gzip member (RFC 1952) and builds its deflate
// stream itself, so that a large write is compressed on several cores: it is
// cut into pieces compressed at the same time by independent compressors,
// each piece ending on a byte boundary with a sync flush (an empty stored
// block), and the pieces, concatenated in order, are one valid deflate
// stream, as pigz builds them. A piece does not refer back into the one
// before it; at 32 kB and more a piece compresses within a few bytes of one
// stream (the JSON of a range query: 32,197 bytes in two pieces against
// 32,215 in one). Small writes go through one streaming compressor.
//
// The API writes a response's JSON in one call once it is encoded, so the
// compression of a large answer, which otherwise runs on one core after the
// query's evaluation used them all, takes half the time on two.
type gzipStream struct {
	dst     io.Writer
	fw      *flate.Writer // the streaming compressor
	used    bool          // fw has written since its last flush or reset
	stale   bool          // pieces were written after fw's history: reset it before its next write
	started bool          // the header is written
	crc     uint32
	size    uint32 // bytes in, modulo 2^32 (ISIZE)
	err     error
}

const (
	// pieceMin is the smallest piece compressed on its own.
	pieceMin = 32 << 10
	// pieceMax bounds a piece, and so the compressed bytes held before they
	// are written: a round compresses at most GOMAXPROCS pieces.
	pieceMax = 1 << 20
)

var gzipHeader = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255} // deflate, no flags, no time, unknown OS

// reset starts a new member written to dst.
func (g *gzipStream) reset(dst io.Writer) {
	g.dst, g.used, g.stale, g.started, g.crc, g.size, g.err = dst, false, false, false, 0, 0, nil
	g.fw.Reset(dst)
}

func (g *gzipStream) header() error {
	if !g.started {
		g.started = true
		_, g.err = g.dst.Write(gzipHeader)
	}
	return g.err
}

func (g *gzipStream) Write(p []byte) (int, error) {
	if g.header() != nil {
		return 0, g.err
	}
	g.crc = crc32.Update(g.crc, crc32.IEEETable, p)
	g.size += uint32(len(p))
	procs := runtime.GOMAXPROCS(0)
	if procs < 2 || len(p) < 2*pieceMin {
		if g.stale {
			g.fw.Reset(g.dst)
			g.stale = false
		}
		g.used = true
		if _, err := g.fw.Write(p); err != nil {
			g.err = err
			return 0, err
		}
		return len(p), nil
	}
	if g.used {
		// Byte-align what the streaming compressor wrote before the pieces.
		if g.err = g.fw.Flush(); g.err != nil {
			return 0, g.err
		}
		g.used = false
	}
	g.stale = true
	for rest := p; len(rest) > 0; {
		n := max(min(procs, len(rest)/pieceMin), 1)
		size := min((len(rest)+n-1)/n, pieceMax)
		round := rest[:min(n*size, len(rest))]
		rest = rest[len(round):]
		if g.err = compressPieces(g.dst, round, size); g.err != nil {
			return 0, g.err
		}
	}
	return len(p), nil
}

// compressPieces compresses p in pieces of size bytes at the same time and
// writes them to dst in order, each ending with a sync flush.
func compressPieces(dst io.Writer, p []byte, size int) error {
	var pieces []*piece
	var wg sync.WaitGroup
	for lo := 0; lo < len(p); lo += size {
		pc := pieceFree.get()
		pieces = append(pieces, pc)
		wg.Add(1)
		go pc.compress(&wg, p[lo:min(lo+size, len(p))])
	}
	wg.Wait()
	var err error
	for _, pc := range pieces {
		if err == nil {
			err = pc.err
		}
		if err == nil {
			_, err = dst.Write(pc.out.Bytes())
		}
		pc.release()
	}
	return err
}

// Close ends the deflate stream with a final block and writes the trailer.
func (g *gzipStream) Close() error {
	if g.header() != nil {
		return g.err
	}
	if g.stale {
		g.fw.Reset(g.dst)
		g.stale = false
	}
	if g.err = g.fw.Close(); g.err != nil {
		return g.err
	}
	var t [8]byte
	binary.LittleEndian.PutUint32(t[:4], g.crc)
	binary.LittleEndian.PutUint32(t[4:], g.size)
	_, g.err = g.dst.Write(t[:])
	if g.err == nil {
		g.err = errClosed // a later Write is an error
		return nil
	}
	return g.err
}

var errClosed = errors.New("gzip stream closed")

// piece is one piece's compressor and output.
type piece struct {
	w   *flate.Writer
	out bytes.Buffer
	err error
}

func (pc *piece) compress(wg *sync.WaitGroup, p []byte) {
	defer wg.Done()
	pc.out.Reset()
	pc.w.Reset(&pc.out)
	if _, pc.err = pc.w.Write(p); pc.err == nil {
		pc.err = pc.w.Flush()
	}
}

func (pc *piece) release() {
	pc.w.Reset(io.Discard)
	if pc.out.Cap() > 2*pieceMax {
		pc.out = bytes.Buffer{} // an incompressible piece: not kept
	}
	pc.err = nil
	pieceFree.put(pc)
}

var (
	gzipStreamFree = newFreeList(func() *gzipStream {
		w, _ := flate.NewWriter(io.Discard, flate.BestSpeed)
		return &gzipStream{fw: w}
	})
	pieceFree = newFreeList(func() *piece {
		w, _ := flate.NewWriter(io.Discard, flate.BestSpeed)
		return &piece{w: w}
	})
)

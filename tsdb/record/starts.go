package record

import (
	"encoding/binary"
	"fmt"
)

// TypeCommitStarts is the type byte of a Commit record with start
// timestamps: the compact samples section, metadata, an exemplars section
// and a histograms section (both counts may be 0), then a starts section
// (at least one entry). Encode writes it exactly when c.Starts is not empty.
const TypeCommitStarts byte = 6

// minStartSize bounds the starts count: three one-byte varint deltas.
const minStartSize = 3

// RefStart is the start timestamp ST (non-zero) of the sample or histogram
// of series Ref at T in the same commit.
type RefStart struct {
	Ref   uint64
	T, ST int64
}

// appendStarts writes the starts section of c; Encode calls it only when
// c.Starts is not empty.
func (c *Commit) appendStarts(buf []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(c.Starts)))
	var prevRef uint64
	var prevT, prevST int64
	for i, s := range c.Starts {
		if s.ST == 0 {
			panic(fmt.Sprintf("record: start %d of ref %d at %d has ST 0 (leave such entries out)", i, s.Ref, s.T))
		}
		buf = binary.AppendVarint(buf, int64(s.Ref-prevRef))
		buf = binary.AppendVarint(buf, s.T-prevT)
		buf = binary.AppendVarint(buf, s.ST-prevST)
		prevRef, prevT, prevST = s.Ref, s.T, s.ST
	}
	return buf
}

// decodeStarts reads the starts section of a TypeCommitStarts record.
func (c *Commit) decodeStarts(d *decoder) {
	n := d.count("start", minStartSize)
	if n == 0 {
		d.fail("starts record without starts") // one encoding per commit
	}
	if d.err != nil {
		return
	}
	c.Starts = grow(c.Starts, n)
	var prevRef uint64
	var prevT, prevST int64
	for i := 0; i < n && d.err == nil; i++ {
		ref := prevRef + uint64(d.varint("start ref delta"))
		t := prevT + d.varint("start timestamp delta")
		st := prevST + d.varint("start ST delta")
		if d.err == nil && st == 0 {
			d.fail("start timestamp 0 stored") // Encode never writes one
		}
		c.Starts[i] = RefStart{Ref: ref, T: t, ST: st}
		prevRef, prevT, prevST = ref, t, st
	}
}

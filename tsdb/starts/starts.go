// Package starts holds the start timestamps (ST) of one series' samples as
// runs: a run covers the samples from From to To (inclusive) and gives each
// sample at t the start timestamp of its rule, either a fixed time (a
// cumulative counter's process start: one run until the next reset) or
// t minus a fixed offset (delta samples, whose start is the previous
// sample's time). A sample outside every run has no start timestamp (0,
// "unset", as remote write 2.0 and Prometheus's AppenderV2 mean it).
//
// Runs are rebuilt from (t, st) pairs wherever samples are rewritten (block
// export, compaction), so a run never covers a sample whose start timestamp
// differs from its rule; a series without start timestamps has no runs.
//
// # Byte layout
//
// AppendEncoded writes, with varints as encoding/binary produces them:
//
//	runs := uvarint n, then n times:
//	          varint (From - previous To)   (previous To: 0 before the first)
//	          uvarint (To - From)
//	          uvarint kind                  (0 Fixed, 1 Offset)
//	          varint (V - previous V)       (previous V: 0 before the first)
//
// Runs are in strictly increasing, non-overlapping order (From > previous
// To) and varints are minimal; Decode refuses anything else, and every run takes at least 4 bytes,
// so a count is checked against the bytes left before memory is allocated.
package starts

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// Kind is how a run derives a sample's start timestamp.
type Kind uint8

// The rules of a run.
const (
	Fixed  Kind = iota // st = V
	Offset             // st = t - V
)

// Run gives the samples at From…To (inclusive) the start timestamp of its rule.
type Run struct {
	From, To int64
	Kind     Kind
	V        int64
}

// ST returns the start timestamp the run gives a sample at t.
func (r *Run) ST(t int64) int64 {
	if r.Kind == Offset {
		return t - r.V
	}
	return r.V
}

func (r *Run) matches(t, st int64) bool { return r.ST(t) == st }

// Runs are a series' start timestamp runs in time order; nil holds none.
type Runs []Run

// ErrCorrupt is wrapped by every Decode error.
var ErrCorrupt = errors.New("starts: corrupt runs")

// find returns the index of the run holding t, or -1, and the index of the
// first run after t.
func (rs Runs) find(t int64) (int, int) {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].To >= t })
	if i < len(rs) && rs[i].From <= t {
		return i, i
	}
	return -1, i
}

// At returns the start timestamp of the sample at t (0: none).
func (rs Runs) At(t int64) int64 {
	if n := len(rs); n > 0 && t >= rs[n-1].From {
		if t <= rs[n-1].To {
			return rs[n-1].ST(t)
		}
		return 0
	}
	if i, _ := rs.find(t); i >= 0 {
		return rs[i].ST(t)
	}
	return 0
}

// Append records that the sample at t has start timestamp st (0: none),
// where t is after every sample of the series and prevT is the newest
// sample before it (math.MinInt64 if none): a run is extended only over
// adjacent samples, so samples without a start timestamp need no record.
// O(1); a t not after the last run is handed to Insert.
func (rs *Runs) Append(prevT, t, st int64) {
	r := *rs
	n := len(r)
	if n > 0 && t <= r[n-1].To {
		rs.Insert(t, st)
		return
	}
	if st == 0 {
		return
	}
	if n > 0 && r[n-1].To == prevT {
		last := &r[n-1]
		switch {
		case last.matches(t, st):
			last.To = t
			return
		case last.From == last.To && last.Kind == Fixed && t-st == last.From-last.V:
			// Two samples each starting a fixed time before them: deltas.
			last.Kind, last.V, last.To = Offset, t-st, t
			return
		}
	}
	*rs = append(r, Run{From: t, To: t, V: st})
}

// Insert records that the sample at t, anywhere in time, has start
// timestamp st (0: none), replacing what was recorded for t: it splits the
// run holding t, and never extends a run (the samples next to t may have
// other start timestamps).
func (rs *Runs) Insert(t, st int64) {
	r := *rs
	i, next := r.find(t)
	if i < 0 {
		if st != 0 {
			*rs = insertRuns(r, next, Run{From: t, To: t, V: st})
		}
		return
	}
	old := r[i]
	if old.matches(t, st) {
		return
	}
	var parts [3]Run
	k := 0
	if old.From < t {
		parts[k] = Run{From: old.From, To: t - 1, Kind: old.Kind, V: old.V}
		k++
	}
	if st != 0 {
		parts[k] = Run{From: t, To: t, V: st}
		k++
	}
	if t < old.To {
		parts[k] = Run{From: t + 1, To: old.To, Kind: old.Kind, V: old.V}
		k++
	}
	*rs = append(r[:i], append(parts[:k:k], r[i+1:]...)...)
}

func insertRuns(r Runs, i int, run Run) Runs {
	r = append(r, Run{})
	copy(r[i+1:], r[i:])
	r[i] = run
	return r
}

// DropBefore removes what is recorded for samples before t.
func (rs *Runs) DropBefore(t int64) {
	r := *rs
	k := 0
	for k < len(r) && r[k].To < t {
		k++
	}
	if k == len(r) {
		*rs = r[:0]
		return
	}
	if r[k].From < t {
		r[k].From = t
	}
	if k > 0 {
		*rs = append(r[:0], r[k:]...)
	}
}

// Clip returns a copy of the runs restricted to [mint, maxt]; nil when none
// has a non-zero start timestamp there.
func (rs Runs) Clip(mint, maxt int64) Runs {
	_, i := rs.find(mint) // the first run ending at or after mint
	var out Runs
	for ; i < len(rs) && rs[i].From <= maxt; i++ {
		r := rs[i]
		r.From, r.To = max(r.From, mint), min(r.To, maxt)
		out = append(out, r)
	}
	if !out.HasST() {
		return nil
	}
	return out
}

// HasST reports whether any run gives a non-zero start timestamp.
func (rs Runs) HasST() bool {
	for i := range rs {
		if rs[i].Kind != Fixed || rs[i].V != 0 {
			return true
		}
	}
	return false
}

// Cursor looks up start timestamps for samples in increasing time order in
// amortized O(1) per sample.
type Cursor struct {
	runs Runs
	i    int
}

// Reset points the cursor at rs.
func (c *Cursor) Reset(rs Runs) { c.runs, c.i = rs, 0 }

// Empty reports whether the cursor has no runs (every sample has ST 0).
func (c *Cursor) Empty() bool { return len(c.runs) == 0 }

// At returns the start timestamp of the sample at t; t may also go back
// (a seek), at the cost of a search.
func (c *Cursor) At(t int64) int64 {
	rs := c.runs
	if len(rs) == 0 {
		return 0
	}
	if c.i >= len(rs) || (c.i > 0 && rs[c.i-1].To >= t) {
		_, c.i = rs.find(t)
	}
	for c.i < len(rs) && rs[c.i].To < t {
		c.i++
	}
	if c.i < len(rs) && rs[c.i].From <= t {
		return rs[c.i].ST(t)
	}
	return 0
}

// AppendEncoded appends the runs' encoding (see the package doc) to dst.
func (rs Runs) AppendEncoded(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(rs)))
	var prevTo, prevV int64
	for _, r := range rs {
		dst = binary.AppendVarint(dst, r.From-prevTo)
		dst = binary.AppendUvarint(dst, uint64(r.To-r.From))
		dst = binary.AppendUvarint(dst, uint64(r.Kind))
		dst = binary.AppendVarint(dst, r.V-prevV)
		prevTo, prevV = r.To, r.V
	}
	return dst
}

// Decode decodes runs that AppendEncoded wrote at the start of b, appending
// them to dst, and returns them with the number of bytes read.
func Decode(dst Runs, b []byte) (Runs, int, error) {
	off := 0
	uv := func(what string) (uint64, error) {
		v, k := binary.Uvarint(b[off:])
		if k <= 0 || (k > 1 && b[off+k-1] == 0) { // truncated, too long or not minimal
			return 0, fmt.Errorf("%s at byte %d: %w", what, off, ErrCorrupt)
		}
		off += k
		return v, nil
	}
	sv := func(what string) (int64, error) {
		v, k := binary.Varint(b[off:])
		if k <= 0 || (k > 1 && b[off+k-1] == 0) {
			return 0, fmt.Errorf("%s at byte %d: %w", what, off, ErrCorrupt)
		}
		off += k
		return v, nil
	}
	n, err := uv("run count")
	if err != nil {
		return dst, off, err
	}
	if n > uint64(len(b)-off)/4 {
		return dst, off, fmt.Errorf("%d runs in %d bytes: %w", n, len(b)-off, ErrCorrupt)
	}
	dst = append(dst, make(Runs, 0, n)...)
	var prevTo, prevV int64
	for j := uint64(0); j < n; j++ {
		d, err := sv("run start")
		if err != nil {
			return dst, off, err
		}
		l, err := uv("run length")
		if err != nil {
			return dst, off, err
		}
		k, err := uv("run kind")
		if err != nil {
			return dst, off, err
		}
		dv, err := sv("run value")
		if err != nil {
			return dst, off, err
		}
		r := Run{From: prevTo + d, Kind: Kind(k), V: prevV + dv}
		r.To = r.From + int64(l)
		switch {
		case k > uint64(Offset):
			return dst, off, fmt.Errorf("run %d: kind %d: %w", j, k, ErrCorrupt)
		case l > 1<<62 || r.To < r.From:
			return dst, off, fmt.Errorf("run %d: length %d: %w", j, l, ErrCorrupt)
		case j > 0 && r.From <= prevTo:
			return dst, off, fmt.Errorf("run %d starts at %d, not after %d: %w", j, r.From, prevTo, ErrCorrupt)
		}
		dst = append(dst, r)
		prevTo, prevV = r.To, r.V
	}
	return dst, off, nil
}

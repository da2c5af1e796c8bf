package block

import (
	"fmt"
	"math"
	"slices"

	"github.com/tandem-tsdb/tandem/tsdb/encoding"
)

// NumGroups returns the number of groups in the block's index.
func (b *Block) NumGroups() int { return b.ngroups }

// GroupKeys returns the keys of the block's groups in ascending order, reading only the index.
func (b *Block) GroupKeys() ([]string, error) {
	keys := make([]string, b.ngroups)
	for g := range keys {
		k, err := b.groupKey(g)
		if err != nil {
			return nil, err
		}
		keys[g] = string(k)
	}
	return keys, nil
}

// groupKey returns group g's key, aliasing the index.
func (b *Block) groupKey(g int) ([]byte, error) {
	rec, err := record(b.sec[secGroups], b.ngroups, g)
	if err != nil {
		return nil, fmt.Errorf("%s: group %d: %w", b.indexPath, g, err)
	}
	d := decbuf{b: rec}
	k := d.bytes(d.uvarintInt(len(rec)))
	if d.err != nil {
		return nil, fmt.Errorf("%s: group %d: key: %w: %w", b.indexPath, g, d.err, ErrCorrupt)
	}
	return k, nil
}

// findGroup returns the id of the group with key, by binary search over the key-ordered groups.
func (b *Block) findGroup(key string) (int, bool, error) {
	lo, hi := 0, b.ngroups
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		k, err := b.groupKey(m)
		if err != nil {
			return 0, false, err
		}
		if string(k) < key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < b.ngroups {
		k, err := b.groupKey(lo)
		if err != nil {
			return 0, false, err
		}
		if string(k) == key {
			return lo, true, nil
		}
	}
	return 0, false, nil
}

// Group reads the group with the given key into a new Group; ok is false when the block has no such group.
func (b *Block) Group(key string) (g *Group, ok bool, err error) {
	g = &Group{}
	ok, err = b.ReadGroup(key, g)
	if !ok || err != nil {
		return nil, ok, err
	}
	return g, true, nil
}

// ReadGroup decodes the group with the given key into dst, reusing dst's slices; ok is false when the block has no such group.
//
// The result is in Write's input form: Tables[0] is the shared table (possibly
// without rows), columns are sorted by member, and every chunk's CRC is
// checked. Rows of a table where no member has a value are not stored in a
// block, so they do not come back.
func (b *Block) ReadGroup(key string, dst *Group) (ok bool, err error) {
	id, ok, err := b.findGroup(key)
	if !ok || err != nil {
		return ok, err
	}
	var d groupDecoder
	return true, d.decode(b, id, dst)
}

// Groups returns a GroupSource yielding every group of the block in key order, decoded as by ReadGroup.
// Memory is bounded by one group: the yielded *Group is reused for the next one.
func (b *Block) Groups() GroupSource {
	return func(yield func(*Group) error) error {
		var d groupDecoder
		var g Group
		for id := 0; id < b.ngroups; id++ {
			if err := d.decode(b, id, &g); err != nil {
				return err
			}
			if err := yield(&g); err != nil {
				return err
			}
		}
		return nil
	}
}

// groupDecoder holds the scratch state of decoding groups.
type groupDecoder struct {
	colIdx []int32 // member → index+1 into the current table's columns
	ts     encoding.TSDecoder
	cols   colDecoder
}

// decode reads group id into dst.
func (d *groupDecoder) decode(b *Block, id int, dst *Group) error {
	key, members, tables, err := b.groupInfo(id)
	if err != nil {
		return err
	}
	dst.Key = key
	dst.Members = dst.Members[:0]
	for _, sid := range members {
		l, err := b.Labels(sid)
		if err != nil {
			return err
		}
		dst.Members = append(dst.Members, l)
	}
	if cap(d.colIdx) < len(members) {
		d.colIdx = make([]int32, len(members))
	}
	d.colIdx = d.colIdx[:len(members)]
	ntab := max(len(tables), 1) // a group always has a (possibly empty) shared table
	if cap(dst.Tables) < ntab {
		dst.Tables = append(dst.Tables[:cap(dst.Tables)], make([]Table, ntab-cap(dst.Tables))...)
	}
	dst.Tables = dst.Tables[:ntab]
	for ti := range dst.Tables {
		tb := &dst.Tables[ti]
		tb.Timestamps, tb.Columns = tb.Timestamps[:0], tb.Columns[:0]
		clear(d.colIdx)
		if ti >= len(tables) {
			continue
		}
		for _, cm := range tables[ti] {
			if err := d.chunk(b, cm, tb); err != nil {
				return fmt.Errorf("group %q table %d: %w", key, ti, err)
			}
		}
		slices.SortFunc(tb.Columns, func(x, y Column) int { return x.Member - y.Member })
	}
	return nil
}

// chunk appends the rows and columns of the chunk cm to tb.
func (d *groupDecoder) chunk(b *Block, cm chunkMeta, tb *Table) error {
	body, _, err := b.chunkBody(cm.off, true)
	if err != nil {
		return err
	}
	ch, err := parseChunk(body)
	if err != nil {
		return fmt.Errorf("%s: chunk at %d: %w", b.chunksPath, cm.off, err)
	}
	base := len(tb.Timestamps)
	if base+ch.rows > math.MaxInt32 {
		return fmt.Errorf("%s: chunk at %d: table exceeds %d rows: %w", b.chunksPath, cm.off, math.MaxInt32, ErrCorrupt)
	}
	if tb.Timestamps, err = appendTimestamps(ch, tb.Timestamps, &d.ts); err != nil {
		return fmt.Errorf("%s: chunk at %d: %w", b.chunksPath, cm.off, err)
	}
	if base > 0 && tb.Timestamps[base] <= tb.Timestamps[base-1] {
		return fmt.Errorf("%s: chunk at %d: timestamps disagree with the header or the previous chunk: %w", b.chunksPath, cm.off, ErrCorrupt)
	}
	for i := 0; i < ch.ncols; i++ {
		col, err := ch.column(i)
		if err == nil {
			err = d.column(ch, col, base, tb)
		}
		if err != nil {
			return fmt.Errorf("%s: chunk at %d: %w", b.chunksPath, cm.off, err)
		}
	}
	return nil
}

// appendTimestamps appends the timestamps of ch's rows to ts, checking them against its header.
func appendTimestamps(ch chunkView, ts []int64, dec *encoding.TSDecoder) ([]int64, error) {
	base := len(ts)
	if ch.regular {
		for i := 0; i < ch.rows; i++ {
			ts = append(ts, ch.minT+int64(i)*ch.step)
		}
	} else {
		dec.Reset(ch.tsData, ch.rows)
		for i := 0; i < ch.rows; i++ {
			if !dec.Next() {
				return ts[:base], fmt.Errorf("timestamps: %w: %w", errOr(dec.Err()), ErrCorrupt)
			}
			ts = append(ts, dec.At())
		}
	}
	rs := ts[base:]
	if rs[0] != ch.minT || rs[len(rs)-1] != ch.maxT {
		return ts[:base], fmt.Errorf("timestamps disagree with the header: %w", ErrCorrupt)
	}
	for i := 1; i < len(rs); i++ {
		if rs[i] <= rs[i-1] {
			return ts[:base], fmt.Errorf("timestamps not increasing: %w", ErrCorrupt)
		}
	}
	return ts, nil
}

// column appends col's rows (offset by base) and values to its member's column of tb.
func (d *groupDecoder) column(ch chunkView, col colView, base int, tb *Table) error {
	if col.member >= len(d.colIdx) {
		return fmt.Errorf("column of member %d in a group of %d: %w", col.member, len(d.colIdx), ErrCorrupt)
	}
	k := d.colIdx[col.member] - 1
	if k < 0 {
		k = int32(len(tb.Columns))
		if len(tb.Columns) < cap(tb.Columns) {
			tb.Columns = tb.Columns[:k+1]
			c := &tb.Columns[k]
			c.Rows, c.Values = c.Rows[:0], c.Values[:0]
		} else {
			tb.Columns = append(tb.Columns, Column{})
		}
		tb.Columns[k].Member = col.member
		d.colIdx[col.member] = k + 1
	}
	c := &tb.Columns[k]
	r0 := len(c.Rows)
	var err error
	if c.Rows, c.Values, err = d.cols.appendColumn(ch, col, base, c.Rows, c.Values); err != nil {
		return err
	}
	if r0 > 0 && c.Rows[r0] <= c.Rows[r0-1] {
		return fmt.Errorf("member %d: rows overlap the previous chunk: %w", col.member, ErrCorrupt)
	}
	return nil
}

// colDecoder decodes columns, reusing its value decoders.
type colDecoder struct {
	xor encoding.XORDecoder
	dec encoding.DecimalDecoder
}

// appendColumn appends col's rows (offset by base) and values to rows and vals.
func (d *colDecoder) appendColumn(ch chunkView, col colView, base int, rows []int32, vals []float64) ([]int32, []float64, error) {
	r0, v0 := len(rows), len(vals)
	switch col.presence {
	case presAll:
		for r := 0; r < ch.rows; r++ {
			rows = append(rows, int32(base+r))
		}
	case presRun:
		for r := col.runFirst; r < col.runFirst+col.count; r++ {
			rows = append(rows, int32(base+r))
		}
	case presBitmap:
		for r := 0; r < ch.rows; r++ {
			if col.bitmap[r>>3]&(0x80>>uint(r&7)) != 0 {
				rows = append(rows, int32(base+r))
			}
		}
	}
	switch col.enc {
	case encConst:
		for range col.count {
			vals = append(vals, col.first)
		}
	case encXOR:
		d.xor.Reset(col.data, col.count)
		for range col.count {
			if !d.xor.Next() {
				return rows, vals, fmt.Errorf("member %d: values: %w: %w", col.member, errOr(d.xor.Err()), ErrCorrupt)
			}
			vals = append(vals, d.xor.At())
		}
	case encDecimal:
		d.dec.Reset(col.data, col.count)
		for range col.count {
			if !d.dec.Next() {
				return rows, vals, fmt.Errorf("member %d: values: %w: %w", col.member, errOr(d.dec.Err()), ErrCorrupt)
			}
			vals = append(vals, d.dec.At())
		}
	}
	if len(vals)-v0 != len(rows)-r0 {
		return rows, vals, fmt.Errorf("member %d: %d rows but %d values: %w", col.member, len(rows)-r0, len(vals)-v0, ErrCorrupt)
	}
	return rows, vals, nil
}

// errOr returns err, or errShort when the decoder stopped without one.
func errOr(err error) error {
	if err == nil {
		return errShort
	}
	return err
}

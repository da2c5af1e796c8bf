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
// block, so they do not come back. A member whose column changes kind
// between the chunks of a table (float samples, then histograms) keeps the
// kind of its first chunk there; its samples of another kind in that table
// come back in extra single-column tables after the block's ones, one per
// table and kind. The histograms that dst's Histograms and FloatHistograms
// slices hold in their capacity are decoded into and reused.
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
	extra  []extraTable // the group's extra tables (see ReadGroup)
}

// extraTable is an extra table of a decoded group: the samples of member in
// table (of the block) whose kind differs from the member's column there.
type extraTable struct {
	table, member int
	kind          Kind
	index         int // in Group.Tables
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
	d.extra = d.extra[:0]
	for ti := range ntab {
		tb := &dst.Tables[ti]
		tb.Timestamps, tb.Columns = tb.Timestamps[:0], tb.Columns[:0]
		clear(d.colIdx)
		if ti >= len(tables) {
			continue
		}
		nx := len(d.extra)
		for _, cm := range tables[ti] {
			if err := d.chunk(b, cm, dst, ti); err != nil {
				return fmt.Errorf("group %q table %d: %w", key, ti, err)
			}
		}
		tb = &dst.Tables[ti] // extra tables may have moved the tables
		if len(d.extra) > nx {
			dropUnusedRows(tb)
		}
		slices.SortFunc(tb.Columns, func(x, y Column) int { return x.Member - y.Member })
	}
	return nil
}

// dropUnusedRows removes the rows of tb that no column uses, renumbering the columns' rows.
func dropUnusedRows(tb *Table) {
	newRow := make([]int32, len(tb.Timestamps))
	for _, c := range tb.Columns {
		for _, r := range c.Rows {
			newRow[r] = 1
		}
	}
	n := int32(0)
	for r, used := range newRow {
		if used != 0 {
			tb.Timestamps[n] = tb.Timestamps[r]
			newRow[r] = n
			n++
		}
	}
	tb.Timestamps = tb.Timestamps[:n]
	for _, c := range tb.Columns {
		for k, r := range c.Rows {
			c.Rows[k] = newRow[r]
		}
	}
}

// resetColumn empties c for reuse as member's column.
func resetColumn(c *Column, member int) {
	c.Member = member
	c.Rows, c.Values, c.Histograms, c.FloatHistograms = c.Rows[:0], c.Values[:0], c.Histograms[:0], c.FloatHistograms[:0]
}

// chunk appends the rows and columns of the chunk cm to table ti of dst.
func (d *groupDecoder) chunk(b *Block, cm chunkMeta, dst *Group, ti int) error {
	tb := &dst.Tables[ti]
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
			err = d.column(ch, col, base, dst, ti)
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
		var err error
		if ts, err = dec.AppendAll(ts); err != nil || len(ts)-base != ch.rows {
			return ts[:base], fmt.Errorf("timestamps: %w: %w", errOr(err), ErrCorrupt)
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

// column appends col's rows (offset by base) and samples to its member's column of table ti of dst.
func (d *groupDecoder) column(ch chunkView, col colView, base int, dst *Group, ti int) error {
	if col.member >= len(d.colIdx) {
		return fmt.Errorf("column of member %d in a group of %d: %w", col.member, len(d.colIdx), ErrCorrupt)
	}
	tb := &dst.Tables[ti]
	k := d.colIdx[col.member] - 1
	if k < 0 {
		k = int32(len(tb.Columns))
		if len(tb.Columns) < cap(tb.Columns) {
			tb.Columns = tb.Columns[:k+1]
		} else {
			tb.Columns = append(tb.Columns, Column{})
		}
		resetColumn(&tb.Columns[k], col.member)
		d.colIdx[col.member] = k + 1
	}
	c := &tb.Columns[k]
	if len(c.Rows) > 0 && c.Kind() != col.kind {
		return d.extraColumn(ch, col, base, dst, ti)
	}
	r0 := len(c.Rows)
	if err := d.cols.appendTo(ch, col, base, c); err != nil {
		return err
	}
	if r0 > 0 && c.Rows[r0] <= c.Rows[r0-1] {
		return fmt.Errorf("member %d: rows overlap the previous chunk: %w", col.member, ErrCorrupt)
	}
	return nil
}

// extraColumn appends col's samples, whose kind differs from their member's
// column in table ti of dst, to the extra table for them.
func (d *groupDecoder) extraColumn(ch chunkView, col colView, base int, dst *Group, ti int) error {
	x := slices.IndexFunc(d.extra, func(e extraTable) bool { return e.table == ti && e.member == col.member && e.kind == col.kind })
	if x < 0 {
		n := len(dst.Tables)
		if n < cap(dst.Tables) {
			dst.Tables = dst.Tables[:n+1]
		} else {
			dst.Tables = append(dst.Tables, Table{})
		}
		et := &dst.Tables[n]
		et.Timestamps = et.Timestamps[:0]
		if cap(et.Columns) == 0 {
			et.Columns = make([]Column, 1)
		}
		et.Columns = et.Columns[:1]
		resetColumn(&et.Columns[0], col.member)
		x = len(d.extra)
		d.extra = append(d.extra, extraTable{table: ti, member: col.member, kind: col.kind, index: n})
	}
	et := &dst.Tables[d.extra[x].index]
	c := &et.Columns[0]
	r0 := len(c.Rows)
	if err := d.cols.appendTo(ch, col, base, c); err != nil {
		return err
	}
	ts := dst.Tables[ti].Timestamps
	for j := r0; j < len(c.Rows); j++ {
		t := ts[c.Rows[j]]
		if n := len(et.Timestamps); n > 0 && t <= et.Timestamps[n-1] {
			return fmt.Errorf("member %d: rows overlap the previous chunk: %w", col.member, ErrCorrupt)
		}
		et.Timestamps = append(et.Timestamps, t)
		c.Rows[j] = int32(len(et.Timestamps) - 1)
	}
	return nil
}

// colDecoder decodes columns, reusing its value decoders.
type colDecoder struct {
	xor  encoding.XORDecoder
	dec  encoding.DecimalDecoder
	hdec encoding.HistogramDecoder
	fdec encoding.FloatHistogramDecoder
}

// appendTo appends col's rows (offset by base) and samples to c, whose
// samples, if any, are of col's kind.
func (d *colDecoder) appendTo(ch chunkView, col colView, base int, c *Column) error {
	if len(c.Rows) > 0 && c.Kind() != col.kind {
		return fmt.Errorf("member %d: %s column appended to a %s one", col.member, col.kind, c.Kind())
	}
	if col.kind == KindFloat {
		var err error
		c.Rows, c.Values, err = d.appendColumn(ch, col, base, c.Rows, c.Values)
		return err
	}
	r0 := len(c.Rows)
	c.Rows = appendRows(ch, col, base, c.Rows)
	if err := d.appendHistograms(col, c); err != nil {
		c.Rows = c.Rows[:r0]
		return err
	}
	return nil
}

// appendColumn appends the rows (offset by base) and values of col, a float column, to rows and vals.
func (d *colDecoder) appendColumn(ch chunkView, col colView, base int, rows []int32, vals []float64) ([]int32, []float64, error) {
	if col.kind != KindFloat {
		return rows, vals, fmt.Errorf("member %d: a %s column read as floats", col.member, col.kind)
	}
	r0, v0 := len(rows), len(vals)
	rows = appendRows(ch, col, base, rows)
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

// appendRows appends col's rows (offset by base) to rows.
func appendRows(ch chunkView, col colView, base int, rows []int32) []int32 {
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
	return rows
}

// errOr returns err, or errShort when the decoder stopped without one.
func errOr(err error) error {
	if err == nil {
		return errShort
	}
	return err
}

package compact

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// Deleted returns the deleted time ranges of a series, closed intervals [min, max], or nil if none.
type Deleted func(labels.Labels) [][2]int64

// Rewrite writes a copy of src into dir without the samples that deleted
// names (nil names none) and returns its meta. The copy covers src's time
// range with its compaction level and sources, and is written as Merge
// writes one source: group by group, chunk by chunk and column by column,
// so memory stays bounded however long the block and wide the group. Rows of
// a shared table left without samples go, as do unaligned tables left
// empty; a series whose samples are all deleted leaves the block, and so
// does a group all of whose series do. The exemplars are copied without
// those at deleted timestamps, the start timestamps as they are (they stay
// exact for the samples left). opts.Level, opts.Sources, opts.Exemplars and
// opts.Starts are ignored; src is neither modified nor deleted.
func Rewrite(dir string, src *block.Block, deleted Deleted, opts block.WriteOptions) (block.Meta, error) {
	m := src.Meta()
	opts.Level, opts.Sources = m.Compaction.Level, m.Compaction.Sources
	opts.Exemplars = exemplarsWithout(src, deleted)
	opts.Starts = nil
	if src.NumStartSeries() > 0 {
		opts.Starts = src.StartSource(math.MinInt64, math.MaxInt64)
	}
	meta, err := write(dir, []*block.Block{src}, deleted, opts)
	if err != nil {
		return meta, fmt.Errorf("rewrite block %s into %s: %w", src.Dir(), dir, err)
	}
	return meta, nil
}

// exemplarsWithout returns b's exemplars without those at timestamps deleted names, nil if b has none.
func exemplarsWithout(b *block.Block, deleted Deleted) block.ExemplarSource {
	if b.NumExemplars() == 0 {
		return nil
	}
	src := b.ExemplarSource(math.MinInt64, math.MaxInt64, nil)
	if deleted == nil {
		return src
	}
	return func(yield func(*block.SeriesExemplars) error) error {
		return src(func(se *block.SeriesExemplars) error {
			if iv := deleted(se.Labels); iv != nil {
				se.Exemplars = slices.DeleteFunc(se.Exemplars, func(e block.Exemplar) bool { return deadAt(iv, e.T) })
			}
			return yield(se)
		})
	}
}

// deletionState is what the merger knows of the deleted samples of the group being merged.
type deletionState struct {
	any   bool            // some member has deleted intervals within the group's time range
	dead  [][][2]int64    // per merged member: its deleted intervals within the group's time range, nil if none
	all   [][2]int64      // the union of dead, by start, overlapping intervals joined
	alive []bool          // per merged member: nothing deleted, or some sample left
	final []int32         // merged member → member written, -1 if it goes
	kept  []labels.Labels // the members written
	keep  []bool          // per row of the chunk liveRows reads: some sample left
	rows  []int32         // scratch: a column's rows
}

// findDeleted asks m.deleted for every merged member's deleted intervals that overlap the group's samples.
func (m *merger) findDeleted() {
	d := &m.del
	d.any = false
	if m.deleted == nil || len(m.order) == 0 {
		return
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, i := range m.order {
		lo, hi = min(lo, m.srcs[i].tmin), max(hi, m.srcs[i].tmax)
	}
	d.dead = resize(d.dead, len(m.out))
	d.all = d.all[:0]
	for mm, l := range m.out {
		var iv [][2]int64
		for _, x := range m.deleted(l) {
			if x[0] <= x[1] && x[0] <= hi && x[1] >= lo {
				iv = append(iv, x)
			}
		}
		d.dead[mm] = iv
		d.all = append(d.all, iv...)
	}
	if len(d.all) == 0 {
		return
	}
	d.any = true
	slices.SortFunc(d.all, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	w := 0
	for _, x := range d.all[1:] {
		if x[0] <= d.all[w][1] {
			d.all[w][1] = max(d.all[w][1], x[1])
			continue
		}
		w++
		d.all[w] = x
	}
	d.all = d.all[:w+1]
	d.alive = resize(d.alive, len(m.out))
	for mm, iv := range d.dead {
		d.alive[mm] = iv == nil
	}
}

// liveRows appends to m.shared.ts the rows of source s's shared chunk c (loaded in m.rd) that keep
// a sample, and marks the members whose samples in c are not all deleted alive.
func (m *merger) liveRows(s *source, c block.ChunkRef) error {
	d, st := &m.del, &m.shared
	ts := m.rd.Timestamps()
	if !overlaps(d.all, c.MinT, c.MaxT) {
		st.ts = append(st.ts, ts...)
		for k := range m.rd.NumColumns() {
			mm, err := m.sharedMember(s, k)
			if err != nil {
				return err
			}
			d.alive[mm] = true
		}
		return nil
	}
	d.keep = resize(d.keep, len(ts))
	pending := 0 // rows at deleted timestamps of some member not known to keep a sample yet
	for r, t := range ts {
		if d.keep[r] = !deadAt(d.all, t); !d.keep[r] {
			pending++
		}
	}
	for k := range m.rd.NumColumns() {
		mm, err := m.sharedMember(s, k)
		if err != nil {
			return err
		}
		iv := d.dead[mm]
		if !overlaps(iv, c.MinT, c.MaxT) {
			d.alive[mm], iv = true, nil
		}
		if pending == 0 && d.alive[mm] {
			continue
		}
		if d.rows, err = m.rd.AppendRows(k, d.rows[:0]); err != nil {
			return fmt.Errorf("source %s: %w", s.b.Dir(), err)
		}
		for _, r := range d.rows {
			if iv != nil && deadAt(iv, ts[r]) {
				continue
			}
			d.alive[mm] = true
			if !d.keep[r] {
				d.keep[r] = true
				pending--
			}
		}
	}
	for r, t := range ts {
		if d.keep[r] {
			st.ts = append(st.ts, t)
		}
	}
	return nil
}

// sharedMember returns the merged member of the k-th column of s's shared chunk loaded in m.rd.
func (m *merger) sharedMember(s *source, k int) (int, error) {
	sm := m.rd.Member(k)
	if sm >= len(s.remap) {
		return 0, fmt.Errorf("source %s: shared table: column of member %d in a group of %d: %w",
			s.b.Dir(), sm, len(s.remap), block.ErrCorrupt)
	}
	return int(s.remap[sm]), nil
}

// unalignedAlive marks alive the members not known to be yet that keep a sample in an unaligned table.
func (m *merger) unalignedAlive() error {
	d := &m.del
	for i := range m.srcs {
		s := &m.srcs[i]
		if !s.has {
			continue
		}
		for ti := 1; ti < len(s.tables); ti++ {
			if !slices.ContainsFunc(s.members[ti], func(sm int) bool { return !d.alive[s.remap[sm]] }) {
				continue
			}
			for _, c := range s.tables[ti] {
				if err := m.rd.Reset(s.b, c); err != nil {
					return fmt.Errorf("source %s: %w", s.b.Dir(), err)
				}
				ts := m.rd.Timestamps()
				for k := range m.rd.NumColumns() {
					mm := s.remap[m.rd.Member(k)] // tableMembers checked the member
					iv := d.dead[mm]
					if d.alive[mm] {
						continue
					}
					if !overlaps(iv, c.MinT, c.MaxT) {
						d.alive[mm] = true
						continue
					}
					var err error
					if d.rows, err = m.rd.AppendRows(k, d.rows[:0]); err != nil {
						return fmt.Errorf("source %s: %w", s.b.Dir(), err)
					}
					d.alive[mm] = slices.ContainsFunc(d.rows, func(r int32) bool { return !deadAt(iv, ts[r]) })
				}
			}
		}
	}
	return nil
}

// keptMembers numbers the members alive in order and returns them.
func (m *merger) keptMembers() []labels.Labels {
	d := &m.del
	d.final = resize(d.final, len(m.out))
	clear(d.kept)
	d.kept = d.kept[:0]
	for mm, l := range m.out {
		d.final[mm] = -1
		if d.alive[mm] {
			d.final[mm] = int32(len(d.kept))
			d.kept = append(d.kept, l)
		}
	}
	return d.kept
}

// written returns the member that merged member mm is written as.
func (m *merger) written(mm int) int {
	if !m.del.any {
		return mm
	}
	return int(m.del.final[mm])
}

// withoutDeleted removes tab's deleted samples (tab's columns by merged member) and the rows and
// columns they leave empty, renumbers its members as written and reports whether any sample is left.
func (m *merger) withoutDeleted(tab *block.Table) bool {
	d := &m.del
	if !d.any {
		return true
	}
	for ci := range tab.Columns {
		c := &tab.Columns[ci]
		iv := d.dead[c.Member]
		if iv == nil {
			continue
		}
		keepSamples(c, func(r int32) bool { return !deadAt(iv, tab.Timestamps[r]) })
	}
	if !compactTable(tab) {
		return false
	}
	for ci := range tab.Columns {
		tab.Columns[ci].Member = m.written(tab.Columns[ci].Member)
	}
	return true
}

// deadAt reports whether t lies in one of the closed intervals iv.
func deadAt(iv [][2]int64, t int64) bool {
	for _, x := range iv {
		if t >= x[0] && t <= x[1] {
			return true
		}
	}
	return false
}

// overlaps reports whether one of the closed intervals iv meets [lo, hi].
func overlaps(iv [][2]int64, lo, hi int64) bool {
	for _, x := range iv {
		if x[0] <= hi && x[1] >= lo {
			return true
		}
	}
	return false
}

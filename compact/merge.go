package compact

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// Merge writes one block covering [min MinTime, max MaxTime) of srcs into dir and returns its meta.
//
// Groups are merged by key, one at a time (memory holds one group of each
// source): members are the union by labels; the sources' shared tables are
// concatenated in time order into one shared table; unaligned tables are
// carried over with remapped members (a member's unaligned tables from
// successive sources are concatenated into one). When sources overlap in
// time, a member's samples at one timestamp are kept once: from the source
// listed last. The sources' exemplars are merged the same way: per series
// (by labels) in time order, at one timestamp the exemplar of the source
// listed last. Meta.Compaction.Level is the sources' highest level plus one
// and Sources the union of theirs; opts.Level, opts.Sources and
// opts.Exemplars are ignored. The sources are neither modified nor deleted.
func Merge(dir string, srcs []*block.Block, opts block.WriteOptions) (block.Meta, error) {
	if len(srcs) == 0 {
		return block.Meta{}, fmt.Errorf("merge into %s: no source blocks", dir)
	}
	mint, maxt := int64(math.MaxInt64), int64(math.MinInt64)
	level := 0
	var sources []string
	var keys []string
	for _, b := range srcs {
		m := b.Meta()
		mint, maxt = min(mint, m.MinTime), max(maxt, m.MaxTime)
		level = max(level, m.Compaction.Level)
		sources = append(sources, m.Compaction.Sources...)
		if len(m.Compaction.Sources) == 0 {
			sources = append(sources, m.ULID)
		}
		ks, err := b.GroupKeys()
		if err != nil {
			return block.Meta{}, fmt.Errorf("merge into %s: source %s: %w", dir, b.Dir(), err)
		}
		keys = append(keys, ks...)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	slices.Sort(sources)
	opts.Level = level + 1
	opts.Sources = slices.Compact(sources)
	opts.Exemplars = mergeExemplars(srcs)

	m := newMerger(srcs)
	meta, err := block.Write(dir, mint, maxt, func(yield func(*block.Group) error) error {
		for _, k := range keys {
			g, err := m.merge(k)
			if err != nil {
				return err
			}
			if err := yield(g); err != nil {
				return err
			}
		}
		return nil
	}, opts)
	if err != nil {
		return meta, fmt.Errorf("merge %d blocks into %s: %w", len(srcs), dir, err)
	}
	return meta, nil
}

// merger merges one group at a time, reusing its buffers.
type merger struct {
	srcs    []*block.Block
	in      []block.Group // each source's group
	has     []bool        // the source has the group
	remap   [][]int       // per source: source member → merged member
	members map[string]int
	lbuf    []byte
	order   []int   // sources holding samples of the group, by first timestamp
	tmin    []int64 // per source: the group's first and last timestamp
	tmax    []int64
	colIdx  []int32 // merged member → index+1 into the shared table's columns
	open    []int   // merged member → merged table open for appending, 0 if none
	openPos []int   // merged member → position in order of the source that filled open
	out     block.Group
}

func newMerger(srcs []*block.Block) *merger {
	n := len(srcs)
	return &merger{srcs: srcs, in: make([]block.Group, n), has: make([]bool, n), remap: make([][]int, n),
		members: map[string]int{}, tmin: make([]int64, n), tmax: make([]int64, n)}
}

// merge returns the merged group with key; it is valid until the next call.
func (m *merger) merge(key string) (*block.Group, error) {
	for i, b := range m.srcs {
		ok, err := b.ReadGroup(key, &m.in[i])
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", b.Dir(), err)
		}
		m.has[i] = ok
	}
	// Members: the union by labels, in order of first appearance.
	clear(m.members)
	m.out.Key = key
	m.out.Members = m.out.Members[:0]
	for i := range m.srcs {
		if !m.has[i] {
			continue
		}
		m.remap[i] = m.remap[i][:0]
		for _, l := range m.in[i].Members {
			m.lbuf = l.Bytes(m.lbuf)
			mm, ok := m.members[string(m.lbuf)]
			if !ok {
				mm = len(m.out.Members)
				m.members[string(m.lbuf)] = mm
				m.out.Members = append(m.out.Members, l)
			}
			m.remap[i] = append(m.remap[i], mm)
		}
	}
	// Sources with samples, by first timestamp; they are disjoint when each ends before the next starts.
	m.order = m.order[:0]
	for i := range m.srcs {
		if !m.has[i] {
			continue
		}
		lo, hi, ok := timeRange(&m.in[i])
		if ok {
			m.tmin[i], m.tmax[i] = lo, hi
			m.order = append(m.order, i)
		}
	}
	slices.SortStableFunc(m.order, func(a, b int) int { return cmp.Compare(m.tmin[a], m.tmin[b]) })
	disjoint := true
	for k := 1; k < len(m.order); k++ {
		if m.tmin[m.order[k]] <= m.tmax[m.order[k-1]] {
			disjoint = false
		}
	}
	if disjoint {
		m.concat()
	} else {
		m.overlapping()
	}
	return &m.out, nil
}

// timeRange returns the first and last timestamps of g's tables.
func timeRange(g *block.Group) (lo, hi int64, ok bool) {
	lo, hi = math.MaxInt64, math.MinInt64
	for _, t := range g.Tables {
		if n := len(t.Timestamps); n > 0 {
			lo, hi, ok = min(lo, t.Timestamps[0]), max(hi, t.Timestamps[n-1]), true
		}
	}
	return lo, hi, ok
}

// nextTable extends tables by one, reusing the buffers of a previous table in its capacity.
func nextTable(tables []block.Table) ([]block.Table, *block.Table) {
	if len(tables) < cap(tables) {
		tables = tables[:len(tables)+1]
	} else {
		tables = append(tables, block.Table{})
	}
	t := &tables[len(tables)-1]
	t.Timestamps, t.Columns = t.Timestamps[:0], t.Columns[:0]
	return tables, t
}

// nextColumn extends t's columns by one for member, reusing buffers.
func nextColumn(t *block.Table, member int) *block.Column {
	if len(t.Columns) < cap(t.Columns) {
		t.Columns = t.Columns[:len(t.Columns)+1]
	} else {
		t.Columns = append(t.Columns, block.Column{})
	}
	c := &t.Columns[len(t.Columns)-1]
	c.Member, c.Rows, c.Values = member, c.Rows[:0], c.Values[:0]
	return c
}

// appendColumn appends src's rows (offset by base) and values to dst.
func appendColumn(dst *block.Column, src *block.Column, base int32) {
	for _, r := range src.Rows {
		dst.Rows = append(dst.Rows, r+base)
	}
	dst.Values = append(dst.Values, src.Values...)
}

// concat merges sources whose samples do not overlap in time: shared tables are concatenated in time order;
// a member's unaligned tables are concatenated across sources (each source's are later than the previous ones).
func (m *merger) concat() {
	nm := len(m.out.Members)
	m.colIdx = resize(m.colIdx, nm)
	m.open = resize(m.open, nm)
	m.openPos = resize(m.openPos, nm)
	var shared *block.Table
	m.out.Tables, shared = nextTable(m.out.Tables[:0])
	for _, i := range m.order {
		g := &m.in[i]
		if len(g.Tables) == 0 {
			continue
		}
		base := int32(len(shared.Timestamps))
		shared.Timestamps = append(shared.Timestamps, g.Tables[0].Timestamps...)
		for ci := range g.Tables[0].Columns {
			c := &g.Tables[0].Columns[ci]
			mm := m.remap[i][c.Member]
			k := m.colIdx[mm] - 1
			if k < 0 {
				nextColumn(shared, mm)
				k = int32(len(shared.Columns) - 1)
				m.colIdx[mm] = k + 1
			}
			appendColumn(&shared.Columns[k], c, base)
		}
	}
	for pos, i := range m.order {
		g := &m.in[i]
		for ti := 1; ti < len(g.Tables); ti++ {
			src := &g.Tables[ti]
			if len(src.Timestamps) == 0 || len(src.Columns) == 0 {
				continue
			}
			if len(src.Columns) == 1 {
				mm := m.remap[i][src.Columns[0].Member]
				if o := m.open[mm]; o > 0 && m.openPos[mm] < pos {
					dst := &m.out.Tables[o]
					base := int32(len(dst.Timestamps))
					dst.Timestamps = append(dst.Timestamps, src.Timestamps...)
					appendColumn(&dst.Columns[0], &src.Columns[0], base)
					m.openPos[mm] = pos
					continue
				}
				m.open[mm], m.openPos[mm] = len(m.out.Tables), pos
			}
			var dst *block.Table
			m.out.Tables, dst = nextTable(m.out.Tables)
			dst.Timestamps = append(dst.Timestamps, src.Timestamps...)
			for ci := range src.Columns {
				appendColumn(nextColumn(dst, m.remap[i][src.Columns[ci].Member]), &src.Columns[ci], 0)
			}
		}
	}
}

// resize returns s with n zero elements, reusing its array.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// tsample is one sample of a member in the overlapping merge.
type tsample struct {
	t      int64
	v      float64
	member int
	table  int // 0 shared, else index of the carried-over unaligned table
}

// overlapping merges sources whose samples overlap in time: per member and timestamp the sample of the
// source listed last is kept; shared tables merge into one, unaligned tables are carried over without the dropped samples.
func (m *merger) overlapping() {
	var all []tsample
	ntab := 1
	for i := range m.srcs { // listed order: for equal (member, t), later sources come later
		if !m.has[i] {
			continue
		}
		g := &m.in[i]
		for ti := range g.Tables {
			tab := 0
			if ti > 0 {
				tab = ntab
				ntab++
			}
			t := &g.Tables[ti]
			for ci := range t.Columns {
				c := &t.Columns[ci]
				mm := m.remap[i][c.Member]
				for k, r := range c.Rows {
					all = append(all, tsample{t: t.Timestamps[r], v: c.Values[k], member: mm, table: tab})
				}
			}
		}
	}
	slices.SortStableFunc(all, func(a, b tsample) int {
		return cmp.Or(cmp.Compare(a.member, b.member), cmp.Compare(a.t, b.t))
	})
	// Keep the last of each (member, t).
	w := 0
	for k := range all {
		if k+1 < len(all) && all[k+1].member == all[k].member && all[k+1].t == all[k].t {
			continue
		}
		all[w] = all[k]
		w++
	}
	all = all[:w]
	slices.SortStableFunc(all, func(a, b tsample) int {
		return cmp.Or(cmp.Compare(a.table, b.table), cmp.Compare(a.member, b.member))
	})
	m.out.Tables = m.out.Tables[:0]
	var shared *block.Table
	m.out.Tables, shared = nextTable(m.out.Tables)
	for lo := 0; lo < len(all); {
		hi := lo
		for hi < len(all) && all[hi].table == all[lo].table {
			hi++
		}
		t := shared
		if all[lo].table > 0 {
			m.out.Tables, t = nextTable(m.out.Tables)
			shared = &m.out.Tables[0]
		}
		buildTable(t, all[lo:hi])
		lo = hi
	}
}

// buildTable fills t from samples sorted by member, then time.
func buildTable(t *block.Table, ss []tsample) {
	for _, s := range ss {
		t.Timestamps = append(t.Timestamps, s.t)
	}
	slices.Sort(t.Timestamps)
	t.Timestamps = slices.Compact(t.Timestamps)
	var c *block.Column
	for k, s := range ss {
		if k == 0 || s.member != ss[k-1].member {
			c = nextColumn(t, s.member)
		}
		r, _ := slices.BinarySearch(t.Timestamps, s.t)
		c.Rows = append(c.Rows, int32(r))
		c.Values = append(c.Values, s.v)
	}
}

package compact

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// Merge writes one block covering [min MinTime, max MaxTime) of srcs into dir and returns its meta.
//
// Groups are merged by key, one at a time: members are the union by labels;
// the sources' shared tables merge into one shared table whose rows are the
// union of theirs; unaligned tables are carried over with remapped members
// (a member's unaligned tables from successive sources are concatenated into
// one). When sources overlap in time, a member's samples at one timestamp
// are kept once: from the source listed last. The shared table is merged
// chunk by chunk and column by column (see mergeShared), so memory holds one
// output chunk's encoding and one column, not the group's samples; an
// unaligned table (one series) is merged whole. The merged group is not
// realigned: the sources' groups were when they were written. The sources'
// exemplars are merged the same way: per series (by labels) in time order,
// at one timestamp the exemplar of the source listed last; their start
// timestamps so that every merged sample keeps its own (see mergeStarts).
// Meta.Compaction.Level is the sources' highest level plus one and Sources
// the union of theirs; opts.Level, opts.Sources, opts.Exemplars and
// opts.Starts are ignored. The sources are neither modified nor deleted.
func Merge(dir string, srcs []*block.Block, opts block.WriteOptions) (block.Meta, error) {
	if len(srcs) == 0 {
		return block.Meta{}, fmt.Errorf("merge into %s: no source blocks", dir)
	}
	level := 0
	var sources []string
	for _, b := range srcs {
		m := b.Meta()
		level = max(level, m.Compaction.Level)
		sources = append(sources, m.Compaction.Sources...)
		if len(m.Compaction.Sources) == 0 {
			sources = append(sources, m.ULID)
		}
	}
	slices.Sort(sources)
	opts.Level = level + 1
	opts.Sources = slices.Compact(sources)
	opts.Exemplars = mergeExemplars(srcs)
	opts.Starts = mergeStarts(srcs)
	meta, err := write(dir, srcs, nil, opts)
	if err != nil {
		return meta, fmt.Errorf("merge %d blocks into %s: %w", len(srcs), dir, err)
	}
	return meta, nil
}

// write merges the groups of srcs without the samples deleted names (nil: none) into a block of dir
// covering [min MinTime, max MaxTime) of srcs, with opts as they are.
func write(dir string, srcs []*block.Block, deleted Deleted, opts block.WriteOptions) (block.Meta, error) {
	mint, maxt := int64(math.MaxInt64), int64(math.MinInt64)
	var keys []string
	for _, b := range srcs {
		m := b.Meta()
		mint, maxt = min(mint, m.MinTime), max(maxt, m.MaxTime)
		ks, err := b.GroupKeys()
		if err != nil {
			return block.Meta{}, fmt.Errorf("source %s: %w", b.Dir(), err)
		}
		keys = append(keys, ks...)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	m := newMerger(srcs)
	m.deleted = deleted
	return block.WriteStream(dir, mint, maxt, func(gw *block.GroupWriter) error {
		for _, k := range keys {
			if err := m.merge(gw, k); err != nil {
				return fmt.Errorf("group %q: %w", k, err)
			}
		}
		return nil
	}, opts)
}

// source is one source block's part of the group being merged.
type source struct {
	b          *block.Block
	has        bool               // the block has the group
	tables     [][]block.ChunkRef // the group's tables
	members    [][]int            // per table but the shared one: the source members with a column in it
	remap      []int32            // source member → merged member
	inv        []int32            // merged member → source member, -1 if none (overlapping merges)
	tmin, tmax int64              // the group's first and last timestamp, if it has chunks
	next       int                // the shared table's next chunk to load (mergeShared)
	loaded     []*liveChunk       // the shared table's chunks loaded (mergeShared)
}

// merger merges one group at a time, reusing its buffers.
type merger struct {
	srcs      []source
	scratch   block.GroupChunks
	members   map[string]int
	lbuf      []byte
	out       []labels.Labels // the merged members
	order     []int           // sources holding samples of the group, by first timestamp
	disjoint  bool            // the sources' samples of the group do not overlap in time
	rd        block.ChunkReader
	shared    sharedState
	unaligned unalignedState
	deleted   Deleted       // nil: nothing is deleted
	del       deletionState // the group's deleted samples
}

func newMerger(srcs []*block.Block) *merger {
	m := &merger{srcs: make([]source, len(srcs)), members: map[string]int{}}
	for i, b := range srcs {
		m.srcs[i].b = b
	}
	return m
}

// merge writes the merged group with key.
func (m *merger) merge(gw *block.GroupWriter, key string) error {
	clear(m.members)
	clear(m.out)
	m.out = m.out[:0]
	m.order = m.order[:0]
	for i := range m.srcs {
		s := &m.srcs[i]
		ok, err := s.b.ReadGroupChunks(key, &m.scratch)
		if err != nil {
			return fmt.Errorf("source %s: %w", s.b.Dir(), err)
		}
		s.has = ok
		if !ok {
			continue
		}
		s.tables, m.scratch.Tables = m.scratch.Tables, s.tables
		// Members: the union by labels, in order of first appearance.
		s.remap = s.remap[:0]
		for _, l := range m.scratch.Members {
			m.lbuf = l.Bytes(m.lbuf)
			mm, ok := m.members[string(m.lbuf)]
			if !ok {
				mm = len(m.out)
				m.members[string(m.lbuf)] = mm
				m.out = append(m.out, l)
			}
			s.remap = append(s.remap, int32(mm))
		}
		s.tmin, s.tmax = math.MaxInt64, math.MinInt64
		for _, cs := range s.tables {
			if len(cs) > 0 {
				s.tmin, s.tmax = min(s.tmin, cs[0].MinT), max(s.tmax, cs[len(cs)-1].MaxT)
			}
		}
		if s.tmin <= s.tmax {
			m.order = append(m.order, i)
		}
		if err := m.tableMembers(s); err != nil {
			return fmt.Errorf("source %s: %w", s.b.Dir(), err)
		}
	}
	// Sources with samples, by first timestamp; they are disjoint when each ends before the next starts.
	slices.SortStableFunc(m.order, func(a, b int) int { return cmp.Compare(m.srcs[a].tmin, m.srcs[b].tmin) })
	m.disjoint = true
	for k := 1; k < len(m.order); k++ {
		if m.srcs[m.order[k]].tmin <= m.srcs[m.order[k-1]].tmax {
			m.disjoint = false
		}
	}
	if !m.disjoint {
		m.invert()
	}
	m.findDeleted()
	if err := m.sharedRows(); err != nil {
		return err
	}
	members := m.out
	if m.del.any {
		if err := m.unalignedAlive(); err != nil {
			return err
		}
		if members = m.keptMembers(); len(members) == 0 {
			return nil // every member's samples are deleted: the group goes
		}
	}
	if err := gw.BeginGroup(key, members); err != nil {
		return err
	}
	if err := m.mergeShared(gw); err != nil {
		return err
	}
	var err error
	if m.disjoint {
		err = m.concatUnaligned(gw)
	} else {
		err = m.overlappingUnaligned(gw)
	}
	if err != nil {
		return err
	}
	return gw.EndGroup()
}

// tableMembers records, for each of s's tables but the shared one, the source members with a column in it.
func (m *merger) tableMembers(s *source) error {
	for len(s.members) < len(s.tables) {
		s.members = append(s.members, nil)
	}
	for ti := 1; ti < len(s.tables); ti++ {
		ms := s.members[ti][:0]
		for _, c := range s.tables[ti] {
			if err := m.rd.Reset(s.b, c); err != nil {
				return err
			}
			for k := range m.rd.NumColumns() {
				sm := m.rd.Member(k)
				if sm >= len(s.remap) {
					return fmt.Errorf("table %d: column of member %d in a group of %d: %w", ti, sm, len(s.remap), block.ErrCorrupt)
				}
				if !slices.Contains(ms, sm) {
					ms = append(ms, sm)
				}
			}
		}
		slices.Sort(ms)
		s.members[ti] = ms
	}
	return nil
}

// invert fills each source's inv, the source member of each merged member.
func (m *merger) invert() {
	for i := range m.srcs {
		s := &m.srcs[i]
		if !s.has {
			continue
		}
		s.inv = resize(s.inv, len(m.out))
		for k := range s.inv {
			s.inv[k] = -1
		}
		for sm, mm := range s.remap {
			s.inv[mm] = int32(sm)
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

package block

import (
	"slices"

	"github.com/prometheus/prometheus/model/histogram"
)

// realign folds every table of g whose timestamps all occur in one large
// table of g (the one of the largest few that takes the most samples) into
// that table, which becomes the group's first. Series the head
// kept unaligned because their samples arrived apart (a sender's shards
// racing through a backlog, say) but that were sampled at the same instants
// as the rest of their group then share one timestamp column on disk, as if
// they had arrived together. A table is left alone when one of its samples
// would land on a row where its member already has a value, or where its
// member's column holds samples of another kind (floats and histograms). g
// itself is not modified; without anything to fold it is returned as is.
func realign(g *Group) *Group {
	if len(g.Tables) < 2 {
		return g
	}
	// The base is the largest table that takes the most samples of the
	// others (a jittered member may have as many rows as its group).
	order := make([]int, len(g.Tables))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return len(g.Tables[b].Timestamps) - len(g.Tables[a].Timestamps)
	})
	base, best := -1, 0
	var fold []int
	var rowOf map[int64]int32
	var tried [][]int64
	for _, cand := range order[:min(len(order), 4)] {
		ts := g.Tables[cand].Timestamps
		if slices.ContainsFunc(tried, func(t []int64) bool { return slices.Equal(t, ts) }) {
			continue // same timestamps as a base already tried: same outcome
		}
		tried = append(tried, ts)
		f, n, ro := planFold(g, cand)
		if n > best {
			base, best, fold, rowOf = cand, n, f, ro
		}
	}
	if base < 0 {
		return g
	}
	bt := &g.Tables[base]

	type entry struct {
		row int32
		col *Column // the sample's column and its index there
		i   int
	}
	byMember := map[int][]entry{}
	for ci := range bt.Columns {
		c := &bt.Columns[ci]
		es := make([]entry, len(c.Rows))
		for i, r := range c.Rows {
			es[i] = entry{r, c, i}
		}
		byMember[c.Member] = es
	}
	for _, ti := range fold {
		tb := &g.Tables[ti]
		for ci := range tb.Columns {
			c := &tb.Columns[ci]
			es := byMember[c.Member]
			for i, r := range c.Rows {
				es = append(es, entry{rowOf[tb.Timestamps[r]], c, i})
			}
			byMember[c.Member] = es
		}
	}
	members := make([]int, 0, len(byMember))
	for m := range byMember {
		members = append(members, m)
	}
	slices.Sort(members)
	folded := Table{Timestamps: bt.Timestamps, Columns: make([]Column, 0, len(members))}
	for _, m := range members {
		es := byMember[m]
		slices.SortFunc(es, func(a, b entry) int { return int(a.row) - int(b.row) })
		c := Column{Member: m, Rows: make([]int32, len(es))}
		kind := KindFloat
		if len(es) > 0 {
			kind = es[0].col.Kind() // planFold folds only columns of one kind
		}
		switch kind {
		case KindHistogram:
			c.Histograms = make([]*histogram.Histogram, len(es))
		case KindFloatHistogram:
			c.FloatHistograms = make([]*histogram.FloatHistogram, len(es))
		default:
			c.Values = make([]float64, len(es))
		}
		for i, e := range es {
			c.Rows[i] = e.row
			switch kind {
			case KindHistogram:
				c.Histograms[i] = e.col.Histograms[e.i]
			case KindFloatHistogram:
				c.FloatHistograms[i] = e.col.FloatHistograms[e.i]
			default:
				c.Values[i] = e.col.Values[e.i]
			}
		}
		folded.Columns = append(folded.Columns, c)
	}
	out := &Group{Key: g.Key, Members: g.Members, Tables: []Table{folded}}
	for ti := range g.Tables {
		if ti != base && !slices.Contains(fold, ti) {
			out.Tables = append(out.Tables, g.Tables[ti])
		}
	}
	return out
}

// planFold returns the tables that fold into table base, the number of
// samples they hold and base's row by timestamp.
func planFold(g *Group, base int) (fold []int, samples int, rowOf map[int64]int32) {
	bt := &g.Tables[base]
	if len(bt.Timestamps) == 0 {
		return nil, 0, nil
	}
	rowOf = make(map[int64]int32, len(bt.Timestamps))
	for i, t := range bt.Timestamps {
		rowOf[t] = int32(i)
	}
	// Rows each member occupies in the folded table, as bitmaps.
	words := (len(bt.Timestamps) + 63) / 64
	occupied := map[int][]uint64{}
	occ := func(m int) []uint64 {
		b := occupied[m]
		if b == nil {
			b = make([]uint64, words)
			occupied[m] = b
		}
		return b
	}
	kinds := map[int]Kind{} // the kind of each member's samples in the folded table
	for _, c := range bt.Columns {
		b := occ(c.Member)
		for _, r := range c.Rows {
			b[r>>6] |= 1 << (uint(r) & 63)
		}
		if len(c.Rows) > 0 {
			kinds[c.Member] = c.Kind()
		}
	}
	for ti := range g.Tables {
		if ti == base || !foldable(&g.Tables[ti], rowOf, occupied, kinds) {
			continue
		}
		tb := &g.Tables[ti]
		for _, c := range tb.Columns {
			if len(c.Rows) > 0 {
				kinds[c.Member] = c.Kind()
			}
			b := occ(c.Member)
			for _, r := range c.Rows {
				row := rowOf[tb.Timestamps[r]]
				b[row>>6] |= 1 << (uint(row) & 63)
			}
			samples += len(c.Rows)
		}
		fold = append(fold, ti)
	}
	return fold, samples, rowOf
}

// foldable reports whether every sample of tb has its timestamp among
// rowOf's and lands on a row its member does not occupy yet (in occupied,
// nor twice within tb), in a column of its kind (kinds, by member).
func foldable(tb *Table, rowOf map[int64]int32, occupied map[int][]uint64, kinds map[int]Kind) bool {
	for _, t := range tb.Timestamps {
		if _, ok := rowOf[t]; !ok {
			return false
		}
	}
	for _, c := range tb.Columns {
		if k, ok := kinds[c.Member]; ok && len(c.Rows) > 0 && k != c.Kind() {
			return false
		}
		b := occupied[c.Member]
		for _, r := range c.Rows {
			row := rowOf[tb.Timestamps[r]]
			if b != nil && b[row>>6]&(1<<(uint(row)&63)) != 0 {
				return false
			}
		}
	}
	return true
}

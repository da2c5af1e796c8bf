package head

import (
	"sort"
)

// GroupStat describes one group: its key, members by layout and head data.
type GroupStat struct {
	Key       string `json:"key"`
	Members   int    `json:"members"`
	Aligned   int    `json:"aligned"`
	Unaligned int    `json:"unaligned"`
	OpenRows  int    `json:"openRows"`
	Chunks    int    `json:"chunks"`
	Bytes     int    `json:"chunkBytes"`
	MaxTime   int64  `json:"maxTime"`
}

// GroupStats is the head's cardinality view by group.
type GroupStats struct {
	Groups          int         `json:"groups"`
	Series          int         `json:"series"`
	AlignedSeries   int         `json:"alignedSeries"`
	UnalignedSeries int         `json:"unalignedSeries"`
	TopByMembers    []GroupStat `json:"topByMembers"`
	TopByUnaligned  []GroupStat `json:"topByUnaligned"`
}

// GroupStats returns the groups with the most members and with the most
// unaligned members (limit of each), and totals.
func (h *Head) GroupStats(limit int) GroupStats {
	if limit <= 0 {
		limit = 10
	}
	var all []GroupStat
	var st GroupStats
	h.forEachGroup(func(g *group) {
		g.mu.Lock()
		gs := GroupStat{Key: g.key, Members: g.numMembers(), Unaligned: g.nUnaligned, OpenRows: len(g.aligned.open), MaxTime: g.maxT}
		gs.Aligned = gs.Members - gs.Unaligned
		add := func(tb *table) {
			gs.Chunks += len(tb.chunks)
			for _, c := range tb.chunks {
				gs.Bytes += c.size()
			}
		}
		add(g.aligned)
		for _, s := range g.members {
			if s != nil && s.own() != nil {
				add(s.own())
			}
		}
		g.mu.Unlock()
		all = append(all, gs)
		st.Groups++
		st.Series += gs.Members
		st.AlignedSeries += gs.Aligned
		st.UnalignedSeries += gs.Unaligned
	})
	top := func(less func(a, b GroupStat) bool) []GroupStat {
		s := append([]GroupStat(nil), all...)
		sort.Slice(s, func(i, j int) bool {
			if less(s[i], s[j]) != less(s[j], s[i]) {
				return less(s[i], s[j])
			}
			return s[i].Key < s[j].Key
		})
		return s[:min(limit, len(s))]
	}
	st.TopByMembers = top(func(a, b GroupStat) bool { return a.Members > b.Members })
	st.TopByUnaligned = top(func(a, b GroupStat) bool { return a.Unaligned > b.Unaligned })
	return st
}

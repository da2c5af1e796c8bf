package block

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
)

// Index sections, in file order.
const (
	secSymbols = iota
	secSeries
	secGroups
	secPostings
	secLabels
	numSections
)

var sectionNames = [numSections]string{"symbols", "series", "groups", "postings", "label index"}

const (
	indexHeaderLen = 5
	indexTOCLen    = 8*numSections + 4
)

// seriesStride is how many series records share one entry of the series
// section's offset table (version 7).
const seriesStride = 16

// The series section of version 7 starts with the series count (be32) and
// a flags byte (seriesFlags); its offset table follows (seriesTableStart).
const (
	seriesFlags      = 4
	seriesTableStart = 5
)

// seriesLeadOmitted, in the flags byte of the series section (version 7),
// says that every series has the block's first label name and that its pair
// is left out of the records: the runs of its postings give it.
const seriesLeadOmitted = 1

// seriesAllSampled, in the same flags byte, says that every series of the
// block has samples in it: a range that covers the block needs no chunk
// read to tell which series it holds.
const seriesAllSampled = 2

// seriesRef identifies a member of a group during index building.
type seriesRef struct {
	g, m int32
}

// writeIndex writes the index file for groups.
func writeIndex(path string, groups []groupRec, meta *Meta) error {
	// Series ids in label order.
	n := 0
	for g := range groups {
		n += len(groups[g].members)
	}
	refs := make([]seriesRef, 0, n)
	for g := range groups {
		for m := range groups[g].members {
			refs = append(refs, seriesRef{int32(g), int32(m)})
		}
	}
	lbl := func(r seriesRef) labels.Labels { return groups[r.g].members[r.m] }
	slices.SortFunc(refs, func(a, b seriesRef) int { return labels.Compare(lbl(a), lbl(b)) })
	seriesID := make([][]uint32, len(groups))
	for g := range groups {
		seriesID[g] = make([]uint32, len(groups[g].members))
	}
	for i, r := range refs {
		if i > 0 && labels.Equal(lbl(r), lbl(refs[i-1])) {
			return fmt.Errorf("%s: duplicate series %s", path, lbl(r))
		}
		seriesID[r.g][r.m] = uint32(i)
	}
	// Group ids in key order.
	gorder := make([]int, len(groups))
	for i := range gorder {
		gorder[i] = i
	}
	slices.SortFunc(gorder, func(a, b int) int { return strings.Compare(groups[a].key, groups[b].key) })
	groupID := make([]uint32, len(groups))
	for i, g := range gorder {
		if i > 0 && groups[g].key == groups[gorder[i-1]].key {
			return fmt.Errorf("%s: duplicate group key %q", path, groups[g].key)
		}
		groupID[g] = uint32(i)
	}

	// Postings, encoded as they are collected.
	postings := map[string]map[string]*postingsBuilder{}
	for i, r := range refs {
		lbl(r).Range(func(l labels.Label) {
			vs := postings[l.Name]
			if vs == nil {
				vs = map[string]*postingsBuilder{}
				postings[l.Name] = vs
			}
			pl := vs[l.Value]
			if pl == nil {
				pl = &postingsBuilder{}
				vs[l.Value] = pl
			}
			pl.add(uint32(i))
		})
	}

	// The label pairs every member of a group has are stored once, with the
	// group (the target's job and instance, say), not in each series record.
	common := make([]labels.Labels, len(groups))
	for g := range groups {
		common[g] = commonLabels(groups[g].members)
	}
	// When every series has the first label name (__name__, as a rule), its
	// pair is left out of the series records: series ids are in label
	// order, so the ids of each of its values are a run, and the runs of
	// the label index say which value a series has.
	lead := ""
	for n := range postings {
		if lead == "" || n < lead {
			lead = n
		}
	}
	total := 0
	for _, pl := range postings[lead] {
		total += int(pl.n)
	}
	omitLead := lead != "" && total == len(refs)
	if omitLead {
		for g := range common {
			if common[g].Has(lead) {
				common[g] = labels.NewBuilder(common[g]).Del(lead).Labels()
			}
		}
	}
	// own reports whether series r's record holds pair l.
	own := func(r seriesRef, l labels.Label) bool {
		c := common[r.g]
		return !(omitLead && l.Name == lead) && !(c.Has(l.Name) && c.Get(l.Name) == l.Value)
	}

	// Symbols. A symbol's reference is its index in the table, most used by
	// series and group records first (the label index's references are
	// fixed-width): the symbols of most label pairs take one-byte references.
	symSet := map[string]int{} // symbol → uses
	for _, r := range refs {
		lbl(r).Range(func(l labels.Label) {
			if own(r, l) {
				symSet[l.Name]++
				symSet[l.Value]++
			}
		})
	}
	for g := range groups {
		common[g].Range(func(l labels.Label) {
			symSet[l.Name]++
			symSet[l.Value]++
		})
	}
	for n, vs := range postings {
		symSet[n] += 0
		for v := range vs {
			symSet[v] += 0
		}
	}
	syms := make([]string, 0, len(symSet))
	for s := range symSet {
		syms = append(syms, s)
	}
	slices.SortFunc(syms, func(a, b string) int {
		return cmp.Or(cmp.Compare(symSet[b], symSet[a]), strings.Compare(a, b))
	})
	symRef := make(map[string]uint64, len(syms))
	b := binary.AppendUvarint(nil, uint64(len(syms)))
	tab := len(b)
	b = append(b, make([]byte, 4*len(syms))...)
	entries := len(b)
	for i, s := range syms {
		symRef[s] = uint64(i)
		binary.BigEndian.PutUint32(b[tab+4*i:], uint32(len(b)-entries))
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	// Each section goes to the file as soon as it is built.
	f, err := createFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	sw := &sectionWriter{f: f}
	sw.out(append(binary.BigEndian.AppendUint32(nil, indexMagic), FormatVersion))
	sw.write(secSymbols, b)
	b = nil

	// Series: count, the offsets of every seriesStride-th record, records
	// each preceded by its length.
	recs := make([]byte, 0, 16*len(refs))
	var rec, pairs []byte
	var npairs int
	var mts []memberTable
	offs := make([]uint32, 0, (len(refs)+seriesStride-1)/seriesStride)
	for i, r := range refs {
		if i%seriesStride == 0 {
			offs = append(offs, uint32(len(recs)))
		}
		l := lbl(r)
		mts = groups[r.g].spans.appendTo(mts[:0], int(r.m))
		// The common case, every chunk of the group's shared table, lists no tables.
		listed := len(mts) != 1 || mts[0] != (memberTable{table: 0, first: 0, last: len(groups[r.g].tables[0]) - 1})
		pairs, npairs = pairs[:0], 0
		l.Range(func(p labels.Label) {
			if own(r, p) {
				pairs = binary.AppendUvarint(pairs, symRef[p.Name])
				pairs = binary.AppendUvarint(pairs, symRef[p.Value])
				npairs++
			}
		})
		head := uint64(npairs) << 1
		if listed {
			head |= 1
		}
		rec = append(binary.AppendUvarint(rec[:0], head), pairs...)
		rec = binary.AppendUvarint(rec, uint64(groupID[r.g]))
		rec = binary.AppendUvarint(rec, uint64(r.m))
		if listed {
			rec = binary.AppendUvarint(rec, uint64(len(mts)))
			for _, mt := range mts {
				rec = binary.AppendUvarint(rec, uint64(mt.table))
				rec = binary.AppendUvarint(rec, uint64(mt.first))
				rec = binary.AppendUvarint(rec, uint64(mt.last-mt.first))
			}
		}
		recs = append(binary.AppendUvarint(recs, uint64(len(rec))), rec...)
	}
	var flags byte
	if omitLead {
		flags |= seriesLeadOmitted
	}
	sampled := true
	for g := range groups {
		for m := range groups[g].members {
			sampled = sampled && groups[g].spans.sampled(m) // every column has samples
		}
	}
	if sampled {
		flags |= seriesAllSampled
	}
	sw.write(secSeries, binary.BigEndian.AppendUint32(nil, uint32(len(refs))), []byte{flags}, be32s(offs), recs)

	// Groups: count, offset table, records.
	recs = recs[:0]
	offs = make([]uint32, len(groups))
	for _, g := range gorder {
		gr := &groups[g]
		offs[groupID[g]] = uint32(len(recs))
		recs = binary.AppendUvarint(recs, uint64(len(gr.key)))
		recs = append(recs, gr.key...)
		recs = binary.AppendUvarint(recs, uint64(len(gr.members)))
		for _, id := range seriesID[g] {
			recs = binary.AppendUvarint(recs, uint64(id))
		}
		recs = binary.AppendUvarint(recs, uint64(len(gr.tables)))
		for _, cms := range gr.tables {
			recs = binary.AppendUvarint(recs, uint64(len(cms)))
			var prevOff uint64
			for _, c := range cms {
				recs = binary.AppendVarint(recs, c.minT)
				recs = binary.AppendUvarint(recs, uint64(c.maxT-c.minT))
				recs = binary.AppendUvarint(recs, c.off-prevOff)
				prevOff = c.off
			}
		}
		recs = binary.AppendUvarint(recs, uint64(common[g].Len()))
		common[g].Range(func(l labels.Label) {
			recs = binary.AppendUvarint(recs, symRef[l.Name])
			recs = binary.AppendUvarint(recs, symRef[l.Value])
		})
	}
	sw.write(secGroups, binary.BigEndian.AppendUint32(nil, uint32(len(offs))), be32s(offs), recs)

	// Postings and the label index.
	names := make([]string, 0, len(postings))
	for n := range postings {
		names = append(names, n)
	}
	slices.Sort(names)
	pb := recs[:0]
	var lb, nb []byte
	lb = make([]byte, 4) // offset of the names table, filled below
	nb = binary.AppendUvarint(nb, uint64(len(names)))
	for _, n := range names {
		vals := make([]string, 0, len(postings[n]))
		for v := range postings[n] {
			vals = append(vals, v)
		}
		slices.Sort(vals)
		nb = binary.AppendUvarint(nb, symRef[n])
		nb = binary.AppendUvarint(nb, uint64(len(vals)))
		nb = binary.AppendUvarint(nb, uint64(len(lb)))
		for _, v := range vals {
			lb = binary.BigEndian.AppendUint32(lb, uint32(symRef[v]))
			lb = binary.BigEndian.AppendUint32(lb, uint32(len(pb)))
			pb = postings[n][v].appendTo(pb)
		}
	}
	binary.BigEndian.PutUint32(lb, uint32(len(lb)))
	sw.write(secPostings, pb)
	sw.write(secLabels, lb, nb)
	sw.out(binary.BigEndian.AppendUint32(sw.toc, crc32.Checksum(sw.toc, castagnoli)))
	if sw.err != nil {
		f.f.Close()
		return fmt.Errorf("%s: %w", path, sw.err)
	}
	if err := f.finish(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// commonLabels returns the label pairs all of members have.
func commonLabels(members []labels.Labels) labels.Labels {
	if len(members) == 0 {
		return labels.EmptyLabels()
	}
	b := labels.NewScratchBuilder(members[0].Len())
	members[0].Range(func(l labels.Label) {
		for _, m := range members[1:] {
			if v := m.Get(l.Name); v != l.Value || v == "" {
				return
			}
		}
		b.Add(l.Name, l.Value)
	})
	return b.Labels()
}

// be32s returns xs as big-endian uint32s.
func be32s(xs []uint32) []byte {
	b := make([]byte, 0, 4*len(xs))
	for _, x := range xs {
		b = binary.BigEndian.AppendUint32(b, x)
	}
	return b
}

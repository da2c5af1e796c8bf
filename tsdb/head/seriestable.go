package head

import "github.com/prometheus/prometheus/model/labels"

// seriesTable finds a stripe's series by their labels hash. It is an
// open-addressing table with linear probing whose slots are a series
// pointer and, in a parallel array, a 32-bit tag: bits 32 to 62 of the hash
// and a bit that marks a used slot. An entry takes 12 bytes at the slot
// level instead of the 16 of a Go map's key and value: ~18 bytes a series
// on average against ~36 for map[uint64]*memSeries at a million series. The
// tag holds the bits a slot's home is taken from, so growing the table moves
// the entries without reading their labels or hashing them again. Series with
// equal hashes are simply separate entries; a lookup checks the labels of
// every slot whose tag matches. Removed entries leave a tombstone until the
// next rebuild. Not safe for concurrent use: the stripe's lock guards it.
type seriesTable struct {
	tags  []uint32 // per slot: tagEmpty, tagDead or a used slot's tag
	slots []*memSeries
	used  int // slots holding a series
	dead  int // tombstones
}

const (
	tagEmpty = 0
	tagDead  = 1 // a removed entry; probes go on past it
	// A used slot's tag has the high bit set, so it is never one of the above.
	tagUsed = 1 << 31
)

// slotTag is the tag of hash. The stripe is chosen by hash % stripes, so the
// low bits are the same for all its series: the tag keeps bits above them.
func slotTag(hash uint64) uint32 { return uint32(hash>>32) | tagUsed }

// home is the first slot of an entry tagged tag: its low bits (a table has
// fewer than 2^31 slots, so the used bit is never among them).
func (t *seriesTable) home(tag uint32) int { return int(tag) & (len(t.slots) - 1) }

// get returns the series with labels lset and hash lset.Hash(), or nil.
func (t *seriesTable) get(hash uint64, lset labels.Labels) *memSeries {
	return t.find(hash, func(s *memSeries) bool { return labels.Equal(s.lset, lset) })
}

// find returns a series of hash that match accepts, or nil.
func (t *seriesTable) find(hash uint64, match func(*memSeries) bool) *memSeries {
	if t.used == 0 {
		return nil
	}
	mask, tag := len(t.slots)-1, slotTag(hash)
	for i := t.home(tag); ; i = (i + 1) & mask {
		switch t.tags[i] {
		case tagEmpty:
			return nil
		case tag:
			if s := t.slots[i]; match(s) {
				return s
			}
		}
	}
}

// add records s, whose labels hash is hash; the caller checked it is not there.
func (t *seriesTable) add(hash uint64, s *memSeries) {
	if (t.used+t.dead+1)*8 > len(t.slots)*7 {
		t.rebuild()
	}
	t.place(slotTag(hash), s)
}

// place puts s, tagged tag, in the first free slot from its home.
func (t *seriesTable) place(tag uint32, s *memSeries) {
	mask := len(t.slots) - 1
	i := t.home(tag)
	for t.tags[i] >= tagUsed {
		i = (i + 1) & mask
	}
	if t.tags[i] == tagDead {
		t.dead--
	}
	t.tags[i], t.slots[i] = tag, s
	t.used++
}

// remove drops s, whose labels hash is hash, if it is there.
func (t *seriesTable) remove(hash uint64, s *memSeries) {
	if t.used == 0 {
		return
	}
	mask := len(t.slots) - 1
	for i := t.home(slotTag(hash)); t.tags[i] != tagEmpty; i = (i + 1) & mask {
		if t.slots[i] == s {
			t.tags[i], t.slots[i] = tagDead, nil
			t.used--
			t.dead++
			return
		}
	}
}

// rebuild moves the series into a table sized for them and one more with
// room to spare: twice as many slots when the used ones alone would fill
// more than half of it, else as many (only tombstones are dropped), and
// fewer when most were removed.
func (t *seriesTable) rebuild() {
	n := 16
	for (t.used+1)*2 > n {
		n *= 2
	}
	oldTags, old := t.tags, t.slots
	t.tags, t.slots, t.used, t.dead = make([]uint32, n), make([]*memSeries, n), 0, 0
	for i, s := range old {
		if s != nil {
			t.place(oldTags[i], s)
		}
	}
}

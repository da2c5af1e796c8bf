package block

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// appendPostings is the reference encoding of a posting list of ascending
// ids: a run of consecutive ids as its count and first id, others as their
// count and gaps (the first from 0).
func appendPostings(dst []byte, ids []uint32) []byte {
	n := uint64(len(ids))
	if n > 1 && uint64(ids[n-1]-ids[0]) == n-1 {
		return binary.AppendUvarint(binary.AppendUvarint(dst, n<<1|1), uint64(ids[0]))
	}
	dst = binary.AppendUvarint(dst, n<<1)
	prev := uint32(0)
	for _, id := range ids {
		dst = binary.AppendUvarint(dst, uint64(id-prev))
		prev = id
	}
	return dst
}

// TestPostingsBuilder checks the builder's encoding against the reference
// for lists that are runs, start as runs and break, have large gaps, one id
// or none.
func TestPostingsBuilder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	lists := [][]uint32{nil, {0}, {7}, {0, 1}, {3, 4, 5, 6}, {3, 4, 5, 7}, {0, 2}, {1 << 31, 1<<31 + 1}, {5, 6, 1 << 30}}
	for range 200 {
		var ids []uint32
		id := rng.Uint32N(1000)
		for range rng.IntN(300) {
			ids = append(ids, id)
			switch rng.IntN(4) {
			case 0:
				id += 1 + rng.Uint32N(100000)
			default:
				id++
			}
		}
		lists = append(lists, ids)
	}
	for _, ids := range lists {
		var p postingsBuilder
		for _, id := range ids {
			p.add(id)
		}
		want := appendPostings([]byte{9}, ids)
		if got := p.appendTo([]byte{9}); !bytes.Equal(got, want) {
			t.Fatalf("ids %v: got %x, want %x", ids, got, want)
		}
	}
}

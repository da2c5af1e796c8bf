package sorted

import (
	"slices"
	"testing"
)

func TestIntersect(t *testing.T) {
	for _, c := range []struct{ a, b, want []uint64 }{
		{nil, nil, nil},
		{[]uint64{1, 2, 3}, nil, nil},
		{[]uint64{1, 3, 5, 7}, []uint64{2, 3, 4, 7, 9}, []uint64{3, 7}},
		{[]uint64{1, 2}, []uint64{3, 4}, nil},
		{[]uint64{5}, []uint64{5}, []uint64{5}},
	} {
		if got := Intersect(nil, c.a, c.b); !slices.Equal(got, c.want) {
			t.Errorf("Intersect(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
		// In place, into a's own array.
		a := slices.Clone(c.a)
		if got := Intersect(a[:0], a, c.b); !slices.Equal(got, c.want) {
			t.Errorf("Intersect in place (%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := Intersects(c.a, c.b); got != (len(c.want) > 0) {
			t.Errorf("Intersects(%v, %v) = %v", c.a, c.b, got)
		}
	}
}

package head

import (
	"sync"
	"testing"
)

func TestRefTable(t *testing.T) {
	var rt refTable
	if rt.get(1) != nil {
		t.Fatal("empty table returned a series")
	}
	series := map[uint64]*memSeries{}
	for _, ref := range []uint64{1, 2, refPageSize - 1, refPageSize, 5*refPageSize + 3, 1 << 20} {
		s := &memSeries{ref: ref}
		rt.set(ref, s)
		series[ref] = s
	}
	for ref, s := range series {
		if got := rt.get(ref); got != s {
			t.Fatalf("get(%d) = %p, want %p", ref, got, s)
		}
	}
	for _, ref := range []uint64{0, 3, refPageSize + 1, 1<<20 + 1, 1 << 40} {
		if got := rt.get(ref); got != nil {
			t.Fatalf("get(%d) = %v, want nil", ref, got)
		}
	}
	n := 0
	prev := uint64(0)
	rt.each(func(s *memSeries) {
		if s.ref <= prev {
			t.Fatalf("each: %d after %d", s.ref, prev)
		}
		prev = s.ref
		n++
	})
	if n != len(series) {
		t.Fatalf("each visited %d, want %d", n, len(series))
	}
	// Deleting the last series of a page frees the page; others stay.
	rt.delete(refPageSize)
	rt.delete(refPageSize) // twice: no effect
	if (*rt.dir.Load())[1].Load() != nil {
		t.Fatal("empty page kept")
	}
	rt.delete(2)
	if rt.get(2) != nil || rt.get(1) != series[1] || (*rt.dir.Load())[0].Load().live != 2 {
		t.Fatal("delete of 2 changed other series")
	}
	rt.set(refPageSize, series[refPageSize])
	if rt.get(refPageSize) != series[refPageSize] {
		t.Fatal("series not found in a page made again")
	}
}

// Readers run without a lock while writers grow the directory (go test -race).
func TestRefTableConcurrent(t *testing.T) {
	var rt refTable
	const n = 20 * refPageSize
	all := make([]*memSeries, n+1)
	for i := range all {
		all[i] = &memSeries{ref: uint64(i)}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ref := uint64(1); ref <= n; ref++ {
			rt.set(ref, all[ref])
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 4; i++ {
			for ref := uint64(1); ref <= n; ref++ {
				if s := rt.get(ref); s != nil && s != all[ref] {
					t.Errorf("get(%d) returned series %d", ref, s.ref)
					return
				}
			}
		}
	}()
	wg.Wait()
	for ref := uint64(1); ref <= n; ref++ {
		if rt.get(ref) != all[ref] {
			t.Fatalf("get(%d) wrong after the writer finished", ref)
		}
	}
}

// each calls fn for every series in reference order.
func (t *refTable) each(fn func(s *memSeries)) {
	dir := t.dir.Load()
	if dir == nil {
		return
	}
	for i := range *dir {
		p := (*dir)[i].Load()
		if p == nil {
			continue
		}
		for j := range p.slots {
			if s := p.slots[j].Load(); s != nil {
				fn(s)
			}
		}
	}
}

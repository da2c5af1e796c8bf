package head

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
)

// exHead appends exemplars to a head and reads them back.
type exHead struct {
	t *testing.T
	h *Head
}

var exSeries = map[string]labels.Labels{
	"a": series("req_total", "job", "j", "instance", "a"),
	"b": series("req_total", "job", "j", "instance", "b"),
}

// add appends a sample of series name at ts with one exemplar (trace id
// name+ts), reporting whether the exemplar was written.
func (x exHead) add(name string, ts int64) bool {
	x.t.Helper()
	e := Exemplar{Labels: labels.FromStrings("trace_id", fmt.Sprint(name, ts)), T: ts, V: float64(ts)}
	b := Batch{Series: []BatchSeries{{Labels: exSeries[name], Samples: []Sample{{T: ts, V: 1}}, Exemplars: []Exemplar{e}}}}
	res, err := x.h.AppendBatch(context.Background(), &b)
	if err != nil {
		x.t.Fatal(err)
	}
	return res.ExemplarsWritten == 1
}

// ring returns the trace ids in the ring, oldest first.
func (x exHead) ring() []string {
	var out []string
	x.h.exemplars.all(func(_ *memSeries, e Exemplar) { out = append(out, e.Labels.Get("trace_id")) })
	return out
}

// query returns the trace ids a query of all series answers, sorted.
func (x exHead) query() []string {
	var out []string
	x.h.Exemplars(math.MinInt64, math.MaxInt64, func(labels.Labels) bool { return true }, func(ls labels.Labels, es []exemplar.Exemplar) {
		for _, e := range es {
			if id := e.Labels.Get("trace_id"); id[:1] != ls.Get("instance") {
				x.t.Fatalf("exemplar %s under series %s", id, ls)
			}
			out = append(out, e.Labels.Get("trace_id"))
		}
	})
	slices.Sort(out)
	return out
}

// expect checks the ring's content, in order, and that queries answer exactly it.
func (x exHead) expect(want ...string) {
	x.t.Helper()
	if got := x.ring(); !slices.Equal(got, want) {
		x.t.Fatalf("ring %v, want %v", got, want)
	}
	sorted := slices.Sorted(slices.Values(want))
	if got := x.query(); !slices.Equal(got, sorted) {
		x.t.Fatalf("query %v, want %v", got, sorted)
	}
	if n := x.h.NumExemplars(); n != len(want) {
		x.t.Fatalf("NumExemplars %d, want %d", n, len(want))
	}
}

func newExHead(t *testing.T, dir string, capacity int) exHead {
	h := openHead(t, dir, func(o *Options) { o.MaxExemplars = capacity })
	return exHead{t: t, h: h}
}

// TestSetMaxExemplarsShrink: the newest exemplars stay, in order; a series
// whose newest exemplar left the ring is forgotten as when the ring
// overwrites it, the others still refuse out-of-order exemplars.
func TestSetMaxExemplarsShrink(t *testing.T) {
	x := newExHead(t, t.TempDir(), 10)
	defer x.h.Close()
	x.add("a", 1000)
	x.add("a", 2000)
	for ts := int64(3000); ts <= 7000; ts += 1000 {
		x.add("b", ts)
	}
	x.add("a", 8000)
	x.add("b", 9000)
	x.expect("a1000", "a2000", "b3000", "b4000", "b5000", "b6000", "b7000", "a8000", "b9000")

	x.h.SetMaxExemplars(4)
	if got := x.h.MaxExemplars(); got != 4 {
		t.Fatalf("MaxExemplars %d, want 4", got)
	}
	x.expect("b6000", "b7000", "a8000", "b9000")
	if u := x.h.LimitUsage(); u.Exemplars != 4 {
		t.Fatalf("LimitUsage: %d exemplars, want 4", u.Exemplars)
	}
	// a's newest (8000) and b's (9000) are still known.
	if x.add("a", 7500) || x.add("b", 8500) {
		t.Fatal("an exemplar older than its series' newest kept one was written")
	}
	if !x.add("b", 9000) {
		t.Fatal("the resent newest exemplar of b was refused")
	}
	// The ring goes on at its new size.
	x.add("a", 10000)
	x.add("b", 11000)
	x.add("a", 12000)
	x.expect("b9000", "a10000", "b11000", "a12000")

	// Shrinking past a series' newest exemplar forgets it, as add does
	// when the ring overwrites it: an older one is accepted again.
	x.h.SetMaxExemplars(1)
	x.expect("a12000")
	if !x.add("b", 10500) {
		t.Fatal("b's newest exemplar left the ring, yet an older one was refused")
	}
	x.expect("b10500")
}

// TestSetMaxExemplarsGrow: growing keeps everything, then holds more.
func TestSetMaxExemplarsGrow(t *testing.T) {
	x := newExHead(t, t.TempDir(), 3)
	defer x.h.Close()
	for ts := int64(1000); ts <= 4000; ts += 1000 {
		x.add("a", ts)
	}
	x.expect("a2000", "a3000", "a4000") // wrapped once
	x.h.SetMaxExemplars(6)
	x.expect("a2000", "a3000", "a4000")
	for ts := int64(5000); ts <= 7000; ts += 1000 {
		x.add("b", ts)
	}
	x.expect("a2000", "a3000", "a4000", "b5000", "b6000", "b7000")
	x.add("a", 8000)
	x.expect("a3000", "a4000", "b5000", "b6000", "b7000", "a8000")

	// A ring not allocated yet takes the new capacity.
	y := newExHead(t, t.TempDir(), 5)
	defer y.h.Close()
	y.h.SetMaxExemplars(2)
	y.add("a", 1000)
	y.add("a", 2000)
	y.add("b", 3000)
	y.expect("a2000", "b3000")
	if n := len(y.h.exemplars.ring); n != 2 {
		t.Fatalf("ring of %d entries, want 2", n)
	}
}

// TestSetMaxExemplarsZero: 0 drops the stored exemplars and stores none,
// samples still written; a later capacity stores again.
func TestSetMaxExemplarsZero(t *testing.T) {
	x := newExHead(t, t.TempDir(), 4)
	defer x.h.Close()
	x.add("a", 1000)
	x.add("b", 2000)
	x.h.SetMaxExemplars(0)
	x.expect()
	if x.h.exemplars.ring != nil || len(x.h.exemplars.last) != 0 {
		t.Fatalf("ring %d entries, %d series remembered after resizing to 0", len(x.h.exemplars.ring), len(x.h.exemplars.last))
	}
	if x.add("a", 3000) {
		t.Fatal("an exemplar was written with max 0")
	}
	x.expect()
	if got := readAll(t, x.h, math.MinInt64, math.MaxInt64); len(got[exSeries["a"].String()]) != 2 {
		t.Fatalf("samples of a: %v, want 2 (the samples are written without their exemplars)", got[exSeries["a"].String()])
	}
	x.h.SetMaxExemplars(2)
	if !x.add("a", 4000) {
		t.Fatal("refused after raising the limit from 0")
	}
	x.expect("a4000")
}

// TestSetMaxExemplarsFlush: exemplars collected for a block before a resize
// leave the ring when the block is in place, whatever the ring's new size.
func TestSetMaxExemplarsFlush(t *testing.T) {
	for _, n := range []int{0, 2, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			x := newExHead(t, t.TempDir(), 4)
			defer x.h.Close()
			for ts := int64(1000); ts <= 4000; ts += 1000 {
				x.add("a", ts)
			}
			e := x.h.ExportRange(0, 2500) // holds a1000 and a2000
			if len(e.exs) != 2 {
				t.Fatalf("%d exemplars exported, want 2", len(e.exs))
			}
			x.h.SetMaxExemplars(n)
			e.Drop()
			switch n {
			case 0:
				x.expect()
			case 2:
				x.expect("a3000", "a4000")
			case 8:
				x.expect("a3000", "a4000")
				for ts := int64(5000); ts <= 10000; ts += 1000 {
					x.add("b", ts)
				}
				x.expect("a3000", "a4000", "b5000", "b6000", "b7000", "b8000", "b9000", "b10000")
			}
		})
	}
}

// TestSetMaxExemplarsRestart: a checkpoint after a shrink holds what was
// kept, and a restart (even with a larger capacity) replays exactly that.
// Before the checkpoint, the WAL replays every logged exemplar into a ring
// of the capacity the head is opened with.
func TestSetMaxExemplarsRestart(t *testing.T) {
	dir := t.TempDir()
	x := newExHead(t, dir, 10)
	for ts := int64(1000); ts <= 8000; ts += 1000 {
		x.add([]string{"a", "b"}[ts/1000%2], ts)
	}
	x.h.SetMaxExemplars(3)
	want := []string{"a6000", "b7000", "a8000"}
	x.expect(want...)
	x.h.Close()

	x = newExHead(t, dir, 3) // the WAL still holds all eight
	x.expect(want...)
	x.h.Close()

	x = newExHead(t, dir, 10)
	x.expect("b1000", "a2000", "b3000", "a4000", "b5000", "a6000", "b7000", "a8000")
	x.h.SetMaxExemplars(3)
	if err := x.h.Checkpoint(0); err != nil {
		t.Fatal(err)
	}
	x.h.Close()

	x = newExHead(t, dir, 10)
	defer x.h.Close()
	x.expect(want...)
	if !x.add("a", 9000) || x.add("b", 6500) {
		t.Fatal("after replay: a new exemplar refused or an out-of-order one written")
	}
	x.expect("a6000", "b7000", "a8000", "a9000")
}

// TestSetMaxExemplarsConcurrent resizes the ring while appends, queries,
// flushes' collect and remove, and checkpoints run (for -race), checking
// that queries see each series' exemplars in time order.
func TestSetMaxExemplarsConcurrent(t *testing.T) {
	x := newExHead(t, t.TempDir(), 100)
	defer x.h.Close()
	const writers, perWriter = 4, 400
	var writing, others sync.WaitGroup
	done := make(chan struct{})
	stopped := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	for w := 0; w < writers; w++ {
		writing.Go(func() {
			l := series("conc", "job", "j", "instance", fmt.Sprint(w))
			for i := 1; i <= perWriter; i++ {
				ts := int64(i) * 1000
				e := Exemplar{Labels: labels.FromStrings("trace_id", fmt.Sprint(i)), T: ts, V: float64(i)}
				b := Batch{Series: []BatchSeries{{Labels: l, Samples: []Sample{{T: ts, V: 1}}, Exemplars: []Exemplar{e}}}}
				if _, err := x.h.AppendBatch(context.Background(), &b); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	queries := 0
	others.Go(func() {
		for !stopped() {
			x.h.Exemplars(math.MinInt64, math.MaxInt64, func(labels.Labels) bool { return true }, func(ls labels.Labels, es []exemplar.Exemplar) {
				if !slices.IsSortedFunc(es, func(a, b exemplar.Exemplar) int { return cmp.Compare(a.Ts, b.Ts) }) {
					t.Errorf("exemplars of %s out of order", ls)
				}
			})
			queries++
		}
	})
	others.Go(func() { // a flush's collect and remove, and checkpoints
		for i := int64(0); !stopped(); i++ {
			lo := i % perWriter * 1000
			exs := x.h.exemplars.collect(func(t int64) bool { return t >= lo && t < lo+5000 })
			x.h.exemplars.remove(exs)
			if i%50 == 0 {
				if err := x.h.Checkpoint(0); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	resizes := 0
	others.Go(func() {
		sizes := []int{0, 1, 7, 300, 3, 50, 0, 1000}
		for ; !stopped(); resizes++ {
			x.h.SetMaxExemplars(sizes[resizes%len(sizes)])
		}
	})
	writing.Wait()
	close(done)
	others.Wait()
	if queries == 0 || resizes == 0 {
		t.Fatalf("%d queries and %d resizes ran alongside the appends", queries, resizes)
	}
	x.h.SetMaxExemplars(5)
	if n := x.h.NumExemplars(); n > 5 {
		t.Fatalf("%d exemplars after resizing to 5", n)
	}
	for i := 1; i <= 5; i++ {
		x.add("a", int64(i)*1000)
	}
	x.expect("a1000", "a2000", "a3000", "a4000", "a5000")
}

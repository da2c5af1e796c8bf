package head

import (
	"context"
	"strconv"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// TestResolveHashFollowsOrder: a series is found by its labels hash, one
// resolved after another through the first one's successor, without a hash,
// and not once it left the head.
func TestResolveHashFollowsOrder(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	a := labels.FromStrings("__name__", "a", "job", "j")
	b := labels.FromStrings("__name__", "b", "job", "j")
	batch := &Batch{Series: []BatchSeries{
		{Labels: a, Samples: []Sample{{T: 1000, V: 1}}},
		{Labels: b, Samples: []Sample{{T: 1000, V: 2}}},
	}}
	if _, err := h.AppendBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	is := func(want labels.Labels) func(labels.Labels) bool {
		return func(l labels.Labels) bool { return labels.Equal(l, want) }
	}
	ra, ok := h.ResolveHash(SeriesRef{}, a.Hash(), is(a))
	if !ok {
		t.Fatal("a not resolved by its hash")
	}
	rb, ok := h.ResolveHash(ra, b.Hash(), is(b))
	if !ok || rb.s == nil || !labels.Equal(rb.s.lset, b) {
		t.Fatal("b not resolved by its hash")
	}
	if _, ok := h.ResolveHash(SeriesRef{}, a.Hash(), is(b)); ok {
		t.Fatal("resolved a hash whose series' labels do not match")
	}
	// A series colliding with a's hash is found behind it.
	c := &memSeries{ref: 99, lset: labels.FromStrings("__name__", "c")}
	st := &h.series[a.Hash()%stripes]
	st.add(a.Hash(), c)
	if r, ok := h.ResolveHash(SeriesRef{}, a.Hash(), is(c.lset)); !ok || r.s != c {
		t.Fatal("a colliding series not resolved")
	}
	st.remove(a.Hash(), c)
	if ra.s.rawNext.Load() != rb.s {
		t.Fatal("a does not lead to b")
	}
	// Without a hash, b is found after a, and only if its labels match.
	if r, ok := h.ResolveNext(ra, is(b)); !ok || r.s != rb.s {
		t.Fatal("b not found after a")
	}
	if _, ok := h.ResolveNext(ra, is(a)); ok {
		t.Fatal("resolved a series whose labels do not match")
	}
	if _, ok := h.ResolveNext(rb, is(a)); ok {
		t.Fatal("resolved a successor never seen")
	}
	rb.s.flags.Or(seriesRemoved)
	if _, ok := h.ResolveNext(ra, is(b)); ok {
		t.Fatal("resolved a series that left the head")
	}
}

// TestSeriesStripeCollisions: series sharing a label hash are all found by
// their labels, and each can be removed, the first one too.
func TestSeriesStripeCollisions(t *testing.T) {
	// Three entries never make the table grow, which would place them by
	// their real hashes.
	var st seriesStripe
	var ss []*memSeries
	for _, v := range []string{"a", "b", "c"} {
		s := &memSeries{lset: labels.FromStrings("x", v)}
		ss = append(ss, s)
		st.add(7, s) // one hash for all: collisions
	}
	for _, s := range ss {
		if st.get(7, s.lset) != s {
			t.Fatalf("%s not found", s.lset)
		}
	}
	if st.get(7, labels.FromStrings("x", "d")) != nil {
		t.Fatal("found a series never added")
	}
	st.remove(7, ss[0])
	if st.get(7, ss[0].lset) != nil || st.get(7, ss[1].lset) != ss[1] || st.get(7, ss[2].lset) != ss[2] {
		t.Fatal("wrong series after removing the first")
	}
	st.remove(7, ss[2])
	st.remove(7, ss[1])
	if st.table.used != 0 || st.get(7, ss[1].lset) != nil {
		t.Fatalf("%d entries left", st.table.used)
	}
}

// TestAppendQuoted: group keys quote values exactly as strconv.Quote does.
func TestAppendQuoted(t *testing.T) {
	for _, v := range []string{"", "host-1:9100", `a"b`, `a\b`, "tab\there", "é", "\x7f", "~ !", "\u2028", "\xff"} {
		if got, want := string(appendQuoted([]byte("x="), v)), "x="+strconv.Quote(v); got != want {
			t.Errorf("%q: %s, want %s", v, got, want)
		}
	}
}

package remote

import (
	"context"
	"math"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// TestKnownSeriesFastPath writes the same series repeatedly through the real
// head, with each protocol: later requests resolve series by label hash
// instead of rebuilding labels, every sample lands on its series, and
// decoding again resolves a known series to its reference but neither an
// unknown one nor one whose labels only share the hash.
func TestKnownSeriesFastPath(t *testing.T) {
	type series struct {
		name string
		t    int64
		v    float64
	}
	for _, proto := range []struct {
		name   string
		encode func(t *testing.T, ss []series) (contentType string, raw []byte)
		decode func(d *decoder, raw []byte) (*head.Batch, error)
	}{
		{"1.0", func(t *testing.T, ss []series) (string, []byte) {
			req := &prompb.WriteRequest{}
			for _, s := range ss {
				req.Timeseries = append(req.Timeseries, v1Series([]string{"__name__", s.name, "instance", "x", "job", "j"}, prompb.Sample{Timestamp: s.t, Value: s.v}))
			}
			return ctV1, marshal(t, req)
		}, (*decoder).decodeV1},
		{"2.0", func(t *testing.T, ss []series) (string, []byte) {
			bld := newV2Builder()
			for _, s := range ss {
				bld.add([]string{"__name__", s.name, "instance", "x", "job", "j"}, writev2.Sample{Timestamp: s.t, Value: s.v})
			}
			return ctV2, marshal(t, bld.build())
		}, (*decoder).decodeV2},
	} {
		t.Run(proto.name, func(t *testing.T) {
			opts := head.DefaultOptions()
			opts.WALSyncInterval = 0
			h, err := head.Open(t.TempDir(), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			srv := testServer(t, h, DefaultLimits(), nil)
			names := []string{"a", "b", "c"}
			for round := int64(0); round < 5; round++ {
				var ss []series
				for i, n := range names {
					ss = append(ss, series{n, 1000 * (round + 1), float64(100*i) + float64(round)})
				}
				ct, raw := proto.encode(t, ss)
				r := post(t, srv.URL, ct, "snappy", snappy.Encode(nil, raw))
				expectStatus(t, r, http.StatusNoContent)
			}
			q, _ := h.Querier(math.MinInt64, math.MaxInt64)
			defer q.Close()
			set := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, "job", "j"))
			n := 0
			for set.Next() {
				s := set.At()
				i := map[string]int{"a": 0, "b": 1, "c": 2}[s.Labels().Get("__name__")]
				it := s.Iterator(nil)
				round := 0
				for it.Next() == chunkenc.ValFloat {
					ts, v := it.At()
					if ts != int64(1000*(round+1)) || v != float64(100*i+round) {
						t.Fatalf("%s: sample %d is (%d, %v)", s.Labels(), round, ts, v)
					}
					round++
				}
				if round != 5 {
					t.Fatalf("%s: %d samples, want 5", s.Labels(), round)
				}
				n++
			}
			if n != 3 {
				t.Fatalf("%d series, want 3", n)
			}
			_, raw := proto.encode(t, []series{{"b", 99000, 1}, {"zzz", 99000, 1}})
			d := newDecoder(Limits{})
			d.resolver = h
			b, err := proto.decode(d, raw)
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Series) != 2 || b.Series[0].Ref.ID == 0 || !b.Series[0].Labels.IsEmpty() || b.Series[1].Ref.ID != 0 {
				t.Fatalf("known series not resolved, or unknown one resolved: %+v", b.Series)
			}
			// Once stored, the new series is found by its hash, but a hash hit
			// whose labels differ (a collision) must not resolve.
			hash := b.Series[1].Labels.Hash()
			if _, err := h.AppendBatch(context.Background(), b); err != nil {
				t.Fatal(err)
			}
			if _, ok := h.ResolveHash(head.SeriesRef{}, hash, func(labels.Labels) bool { return true }); !ok {
				t.Fatal("a stored series is not found by its hash")
			}
			if _, ok := h.ResolveHash(head.SeriesRef{}, hash, func(labels.Labels) bool { return false }); ok {
				t.Fatal("resolved despite a label mismatch")
			}
		})
	}
}

// TestMatchV2Labels: the 2.0 decoder's label check accepts exactly equal
// labels, in order.
func TestMatchV2Labels(t *testing.T) {
	d := newDecoder(Limits{})
	d.v2cur = v2Labels{refs: []uint32{1, 2, 3, 4, 5, 6}, syms: []string{"", "__name__", "b", "instance", "y", "job", "j"}}
	if d.matchV2Labels(labels.FromStrings("__name__", "b", "instance", "x", "job", "j")) {
		t.Fatal("matched labels that differ in a value")
	}
	if d.matchV2Labels(labels.FromStrings("__name__", "b", "instance", "y")) {
		t.Fatal("matched fewer labels")
	}
	if !d.matchV2Labels(labels.FromStrings("__name__", "b", "instance", "y", "job", "j")) {
		t.Fatal("did not match equal labels")
	}
}

// gcBeforeAppend is the real DB with GC of every idle group run between a
// request's decoding and its append, once armed: the race in which a series
// resolved from the decoder's cache has just left the head.
type gcBeforeAppend struct {
	*tsdb.DB
	now   *atomic.Int64 // the DB's clock
	armed bool
}

func (g *gcBeforeAppend) AppendBatch(ctx context.Context, b *head.Batch) (head.AppendResult, error) {
	if g.armed {
		g.armed = false
		// A flush far in the future: every group is idle for a block range
		// and all its data is in blocks, so the flush's GC removes it.
		cur := g.now.Swap(math.MaxInt64 / 4)
		err := g.DB.Flush(true)
		g.now.Store(cur)
		if err != nil {
			return head.AppendResult{}, err
		}
		if gs := g.DB.GroupStats(1); gs.Groups != 0 {
			panic("GC removed nothing: the test no longer exercises the race")
		}
	}
	return g.DB.AppendBatch(ctx, b)
}

// TestSeriesGoneBetweenDecodeAndAppend: the request still succeeds, its
// series are created again by labels, and no sample is lost.
func TestSeriesGoneBetweenDecodeAndAppend(t *testing.T) {
	opts := tsdb.DBOptions{Head: head.DefaultOptions()}
	opts.Head.WALSyncInterval = 0
	var now atomic.Int64
	now.Store(1 << 50)
	opts.Head.Now = now.Load
	db, err := tsdb.OpenDB(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	app := &gcBeforeAppend{DB: db, now: &now}
	srv := testServer(t, app, DefaultLimits(), nil)
	send := func(ts int64) {
		t.Helper()
		req := &prompb.WriteRequest{}
		for i, n := range []string{"a", "b"} {
			req.Timeseries = append(req.Timeseries, v1Series([]string{"__name__", n, "instance", "x", "job", "j"}, prompb.Sample{Timestamp: ts, Value: float64(i)}))
		}
		expectStatus(t, postV1(t, srv.URL, req), http.StatusNoContent)
	}
	send(1000)
	app.armed = true
	const later = 3 * 3600 * 1000 // a block range after the flushed one
	send(later)
	if app.armed {
		t.Fatal("the second request did not reach the appender")
	}
	q, err := db.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, "job", "j"))
	n := 0
	for ss.Next() {
		var ts []int64
		it := ss.At().Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			t, _ := it.At()
			ts = append(ts, t)
		}
		if len(ts) != 2 || ts[0] != 1000 || ts[1] != later {
			t.Errorf("%s: timestamps %v, want [1000 %d]", ss.At().Labels(), ts, later)
		}
		n++
	}
	if n != 2 {
		t.Fatalf("%d series, want 2", n)
	}
}

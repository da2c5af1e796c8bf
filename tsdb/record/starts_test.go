package record

import (
	"errors"
	"math"
	"testing"
)

// startsCommit is sampleCommit with start timestamps for five of its seven
// samples, extremes included, so Encode writes type 0x06 with empty
// exemplars and histograms sections.
func startsCommit() *Commit {
	c := sampleCommit()
	c.Starts = []RefStart{
		{Ref: 1000, T: 1700000000000, ST: 1699999990000},
		{Ref: 1, T: math.MinInt64, ST: math.MaxInt64},
		{Ref: math.MaxUint64, T: math.MaxInt64, ST: math.MinInt64},
		{Ref: 1002, T: -5, ST: -6},
		{Ref: 1000, T: 1700000015000, ST: 1699999990000},
	}
	return c
}

// startsHistogramsCommit has every section: exemplars, histograms, and
// starts of a sample and of three histograms.
func startsHistogramsCommit() *Commit {
	c := exemplarCommit()
	c.Histograms = specialHistograms()[:4]
	c.Starts = []RefStart{
		{Ref: 1000, T: 1700000000000, ST: 1},
		{Ref: 1, T: 1000, ST: 1},
		{Ref: math.MaxUint64, T: math.MinInt64, ST: -1},
		{Ref: 7, T: -1, ST: -100},
	}
	return c
}

func TestStartsRoundTrip(t *testing.T) {
	many := benchCommit()
	for i, s := range many.Samples {
		if i%3 != 0 {
			many.Starts = append(many.Starts, RefStart{Ref: s.Ref, T: s.T, ST: s.T - int64(i%7)*15000 - 1})
		}
	}
	withHist := startsHistogramsCommit()
	withHist.Exemplars = nil
	withEx := startsCommit()
	withEx.Exemplars = exemplarCommit().Exemplars
	cases := map[string]*Commit{
		"samples only":    startsCommit(),
		"with exemplars":  withEx,
		"with histograms": withHist,
		"everything":      startsHistogramsCommit(),
		"only starts":     {Starts: []RefStart{{Ref: 5, T: 10, ST: 3}}},
		"many":            many,
	}
	var reuse Commit
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			rec := c.Encode(nil)
			if rec[0] != TypeCommitStarts {
				t.Fatalf("type byte %d", rec[0])
			}
			var got Commit
			if err := Decode(rec, &got); err != nil {
				t.Fatal(err)
			}
			assertEqualCommit(t, c, &got)
			if err := Decode(rec, &reuse); err != nil {
				t.Fatal(err)
			}
			assertEqualCommit(t, c, &reuse)
			if again := got.Encode(nil); string(again) != string(rec) {
				t.Fatalf("re-encoding differs:\n %x\n %x", again, rec)
			}
			for i := range rec {
				rec[i] = 0xff
			}
			assertEqualCommit(t, c, &got)
		})
	}
}

// TestNoStartsSameBytes: an empty (not nil) Starts keeps the type and bytes
// of each commit kind, and decoding them gives no starts.
func TestNoStartsSameBytes(t *testing.T) {
	for _, mk := range []func() *Commit{sampleCommit, exemplarCommit, histogramCommit} {
		c := mk()
		want := c.Encode(nil)
		c.Starts = []RefStart{}
		got := c.Encode(nil)
		if string(got) != string(want) || got[0] == TypeCommitStarts {
			t.Fatalf("empty starts changed the record: type %d", got[0])
		}
		d := startsCommit()
		if err := Decode(got, d); err != nil || len(d.Starts) != 0 {
			t.Fatalf("decoding type %d: %v, %d starts", got[0], err, len(d.Starts))
		}
	}
}

func TestStartsSize(t *testing.T) {
	c := &Commit{Samples: []RefSample{{Ref: 1, T: 1000, V: 1}}, Starts: []RefStart{{Ref: 1, T: 1000, ST: 990}}}
	// type, series, samples (count, ref, t in 2, value), metadata,
	// exemplars, histograms, starts (count, ref, t in 2, st in 2)
	if n, want := len(c.Encode(nil)), 1+1+(1+1+2+1)+1+1+1+(1+1+2+2); n != want {
		t.Fatalf("record %d bytes, want %d", n, want)
	}
}

func TestStartsTruncated(t *testing.T) {
	for _, c := range []*Commit{startsCommit(), startsHistogramsCommit()} {
		rec := c.Encode(nil)
		var got Commit
		for i := range len(rec) {
			if err := Decode(rec[:i], &got); !errors.Is(err, ErrMalformed) {
				t.Fatalf("truncation to %d of %d bytes: got %v, want ErrMalformed", i, len(rec), err)
			}
		}
	}
}

// startsRec builds a type 6 record with every other section empty, then body.
func startsRec(body ...byte) []byte {
	return append([]byte{TypeCommitStarts, 0, 0, 0, 0, 0}, body...)
}

func TestStartsDecodeErrors(t *testing.T) {
	var c Commit
	if err := Decode(startsRec(1, 2, 2, 2), &c); err != nil || len(c.Starts) != 1 || c.Starts[0] != (RefStart{Ref: 1, T: 1, ST: 1}) || len(c.Histograms) != 0 {
		t.Fatalf("valid base record: %v %+v", err, c.Starts)
	}
	cases := map[string][]byte{
		"empty starts":       startsRec(0),
		"starts missing":     startsRec(),
		"histograms missing": {TypeCommitStarts, 0, 0, 0, 0},
		"exemplars missing":  {TypeCommitStarts, 0, 0, 0},
		"huge starts":        startsRec(2, 2, 2, 2),
		"overlong count":     startsRec(0x81, 0x00, 2, 2, 2),
		"overlong ref":       startsRec(1, 0x82, 0x00, 2, 2),
		"overlong t":         startsRec(1, 2, 0x82, 0x00, 2),
		"overlong st":        startsRec(1, 2, 2, 0x82, 0x00),
		"overflowing st":     startsRec(1, 2, 2, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01),
		"truncated st":       startsRec(1, 2, 2, 0x82),
		"st 0":               startsRec(1, 2, 2, 0),
		"st back to 0":       startsRec(2, 2, 2, 2, 0, 0, 1),
		"trailing bytes":     startsRec(1, 2, 2, 2, 0),
		"unknown type":       {TypeCommitStarts + 1, 0, 0, 0, 0, 0, 1, 2, 2, 2},
	}
	for name, rec := range cases {
		t.Run(name, func(t *testing.T) {
			if err := Decode(rec, &c); !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
		})
	}
}

func TestEncodeZeroStartPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	(&Commit{Starts: []RefStart{{Ref: 1, T: 2, ST: 5}, {Ref: 1, T: 3}}}).Encode(nil)
}

func TestResetKeepsStarts(t *testing.T) {
	c := startsCommit()
	c.Reset()
	if len(c.Starts) != 0 || cap(c.Starts) != 5 {
		t.Fatalf("after Reset: len %d cap %d", len(c.Starts), cap(c.Starts))
	}
}

func TestEncodeStartsNoAlloc(t *testing.T) {
	c := startsHistogramsCommit()
	for _, s := range benchCommit().Samples {
		c.Starts = append(c.Starts, RefStart{Ref: s.Ref, T: s.T, ST: s.T - 60000})
	}
	buf := make([]byte, 0, 1<<20)
	if allocs := testing.AllocsPerRun(20, func() { buf = c.Encode(buf[:0]) }); allocs != 0 {
		t.Fatalf("Encode allocated %v times", allocs)
	}
}

func TestDecodeStartsReuseAllocs(t *testing.T) {
	c := &Commit{Samples: benchCommit().Samples}
	for _, s := range c.Samples {
		c.Starts = append(c.Starts, RefStart{Ref: s.Ref, T: s.T, ST: s.T - 60000})
	}
	rec := c.Encode(nil)
	var got Commit
	if err := Decode(rec, &got); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if err := Decode(rec, &got); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Decode of samples and starts into a reused Commit allocated %v times", allocs)
	}
}

package head

import (
	"runtime"
	"slices"
	"testing"

	"github.com/tandem-tsdb/tandem/tsdb/encoding"
)

// TestChunkTimestamps: a frozen chunk's timestamps are decoded once and
// shared while someone reads them, freed by the garbage collector once
// nobody does (decoded again, equal, on the next read), and nil for bytes
// that do not decode.
func TestChunkTimestamps(t *testing.T) {
	var enc encoding.TSEncoder
	want := make([]int64, 120)
	for i := range want {
		want[i] = 1_700_000_000_000 + int64(i)*15_000 + int64(i%7)
		enc.Append(want[i])
	}
	c := &chunk{ts: slices.Clone(enc.Bytes()), rows: len(want)}
	a := c.timestamps()
	if !slices.Equal(a, want) {
		t.Fatalf("decoded %v, want %v", a, want)
	}
	runtime.GC()
	runtime.GC()
	if b := c.timestamps(); &b[0] != &a[0] {
		t.Fatal("timestamps decoded again while a reader holds them")
	}
	runtime.KeepAlive(a)
	a = nil
	runtime.GC()
	runtime.GC()
	if w := c.decoded.Load(); w == nil || w.Value() != nil {
		t.Fatal("decoded timestamps still held after every reader let go and two collections")
	}
	if got := c.timestamps(); !slices.Equal(got, want) {
		t.Fatalf("decoded again %v, want %v", got, want)
	}
	bad := &chunk{ts: []byte{0xff}, rows: 5}
	if got := bad.timestamps(); got != nil {
		t.Fatalf("corrupt timestamp column decoded to %v", got)
	}
}

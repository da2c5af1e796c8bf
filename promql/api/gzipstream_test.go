package api

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand"
	"runtime"
	"strconv"
	"testing"

	kgzip "github.com/klauspost/compress/gzip"
)

// jsonLike returns n bytes of a range query's JSON-like text.
func jsonLike(r *rand.Rand, n int) []byte {
	var b []byte
	for len(b) < n {
		b = append(b, `[1796342617.123,"`...)
		b = strconv.AppendFloat(b, r.Float64()*100, 'f', -1, 64)
		b = append(b, `"],`...)
	}
	return b[:n]
}

// TestGzipStream writes sequences of small and large writes (compressible
// and random bytes) through one reused gzipStream and reads each member back
// with the standard library's reader: the bytes, CRC and size must match.
func TestGzipStream(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	g := gzipStreamFree.get()
	sizes := []int{0, 1, 100, pieceMin - 1, 2*pieceMin - 1, 2 * pieceMin, 3*pieceMin + 7, 200 << 10, pieceMax + 5, 3*pieceMax + 11}
	for procs := 1; procs <= 4; procs *= 2 {
		prev := runtime.GOMAXPROCS(procs)
		for i := 0; i < 40; i++ {
			var want, out bytes.Buffer
			g.reset(&out)
			for w := 0; w < 1+r.Intn(4); w++ {
				n := sizes[r.Intn(len(sizes))]
				var p []byte
				if r.Intn(4) == 0 {
					p = make([]byte, n)
					r.Read(p) // incompressible
				} else {
					p = jsonLike(r, n)
				}
				want.Write(p)
				if k, err := g.Write(p); err != nil || k != len(p) {
					t.Fatalf("write %d bytes: %d, %v", len(p), k, err)
				}
			}
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Write([]byte("x")); err == nil {
				t.Fatal("write after close: no error")
			}
			zr, err := gzip.NewReader(&out)
			if err != nil {
				t.Fatal(err)
			}
			zr.Multistream(false)
			got, err := io.ReadAll(zr)
			if err != nil {
				t.Fatalf("procs %d case %d: %v", procs, i, err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("procs %d case %d: %d bytes back, want %d", procs, i, len(got), want.Len())
			}
			if rest, _ := io.ReadAll(&out); len(rest) > 0 {
				t.Fatalf("procs %d case %d: %d bytes after the member", procs, i, len(rest))
			}
		}
		runtime.GOMAXPROCS(prev)
	}
}

// BenchmarkGzipStream compresses a 120 kB range-query answer (20 series ×
// 181 points) in one write through gzipStream and, next to it, through one
// klauspost gzip writer at the same level.
func BenchmarkGzipStream(b *testing.B) {
	for _, size := range []int{120 << 10, 1200 << 10} {
		body := jsonLike(rand.New(rand.NewSource(1)), size)
		var out bytes.Buffer
		b.Run(fmt.Sprintf("stream-%dk", size>>10), func(b *testing.B) {
			g := gzipStreamFree.get()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				out.Reset()
				g.reset(&out)
				g.Write(body)
				g.Close()
			}
			b.ReportMetric(float64(out.Len()), "bytes-out")
		})
		b.Run(fmt.Sprintf("gzip-%dk", size>>10), func(b *testing.B) {
			w, _ := kgzip.NewWriterLevel(&out, kgzip.BestSpeed)
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				out.Reset()
				w.Reset(&out)
				w.Write(body)
				w.Close()
			}
			b.ReportMetric(float64(out.Len()), "bytes-out")
		})
	}
}

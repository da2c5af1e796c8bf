package remote

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// pbBytes appends a length-delimited field.
func pbBytes(b []byte, field int, payload []byte) []byte {
	b = binary.AppendUvarint(b, uint64(field<<3|wireBytes))
	b = binary.AppendUvarint(b, uint64(len(payload)))
	return append(b, payload...)
}

// repeated returns n copies of the length-delimited field with payload.
func repeated(field int, payload []byte, n int) []byte {
	return bytes.Repeat(pbBytes(nil, field, payload), n)
}

// Messages of 2 bytes on the wire.
var (
	emptyMsg = []byte{}
	labelAB  = pbBytes(pbBytes(nil, 1, []byte("a")), 2, []byte("b")) // 1.0 Label a="b"
	sample1  = []byte{1<<3 | wireFixed64, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 2<<3 | wireVarint, 1}
)

// v2Symbols is the symbols table "", "a", "b" of the hostile 2.0 requests.
func v2Symbols() []byte {
	return pbBytes(pbBytes(pbBytes(nil, 4, nil), 4, []byte("a")), 4, []byte("b"))
}

// memDuring runs fn and returns the bytes allocated meanwhile (TotalAlloc)
// and the peak heap growth, sampled every millisecond.
func memDuring(fn func()) (allocated, peak uint64) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var (
		max  uint64
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			max = maxU(max, ms.HeapAlloc)
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	fn()
	close(done)
	wg.Wait()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if max = maxU(max, after.HeapAlloc); max > before.HeapAlloc {
		peak = max - before.HeapAlloc
	}
	return after.TotalAlloc - before.TotalAlloc, peak
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// TestWriteAmplification sends requests of millions of entries that are
// tiny on the wire (2 bytes each) and huge as Go structs: each is refused
// (or its entries left out) before the decoder allocates for them, so what
// one request costs stays near its decoded size. The generated 2.0
// Unmarshal took 4 GiB for the first one, the 1.0 decoder 0.25-0.6 GiB for
// the 1.0 ones.
func TestWriteAmplification(t *testing.T) {
	const M = 1 << 20
	series2 := func(fields ...[]byte) []byte { return pbBytes(nil, 5, bytes.Join(fields, nil)) }
	series1 := func(fields ...[]byte) []byte { return pbBytes(nil, 1, bytes.Join(fields, nil)) }
	refsAB := pbBytes(nil, 1, []byte{1, 2}) // labels_refs a="b"
	for _, tc := range []struct {
		name    string
		ct      string
		lim     Limits
		raw     func() []byte
		status  int
		written string // 2.0 samples written
		// histBytes is the memory its histograms may take beyond the bound
		// (MaxHistogramBytesPerRequest, with the histogram arena).
		histBytes uint64
	}{
		{"v2 empty series", ctV2, Limits{}, func() []byte {
			return append(pbBytes(nil, 4, nil), repeated(5, emptyMsg, 4*M)...)
		}, http.StatusRequestEntityTooLarge, "0", 0},
		{"v2 empty symbols", ctV2, Limits{}, func() []byte {
			return append(repeated(4, emptyMsg, 8*M), series2(refsAB, pbBytes(nil, 2, sample1))...)
		}, http.StatusRequestEntityTooLarge, "0", 0},
		{"v2 empty samples", ctV2, Limits{MaxSamplesPerRequest: 100_000}, func() []byte {
			return append(v2Symbols(), series2(refsAB, repeated(2, emptyMsg, 8*M))...)
		}, http.StatusRequestEntityTooLarge, "0", 0},
		{"v2 histogram of empty spans", ctV2, Limits{}, func() []byte {
			return append(v2Symbols(), series2(refsAB, pbBytes(nil, 3, repeated(8, emptyMsg, 4*M)))...)
		}, http.StatusBadRequest, "0", 0},
		{"v2 histogram of millions of buckets", ctV2, Limits{}, func() []byte {
			h := append(pbBytes(nil, 11, []byte{2 << 3, 0x80, 0x80, 0x80, 0x04}), pbBytes(nil, 12, make([]byte, 8*M))...) // one span of 8M buckets
			return append(v2Symbols(), series2(refsAB, pbBytes(nil, 2, sample1), pbBytes(nil, 3, h))...)
		}, http.StatusBadRequest, "1", 0},
		{"v2 empty histograms", ctV2, Limits{MaxHistogramBytesPerRequest: 16 * M}, func() []byte {
			return append(v2Symbols(), series2(refsAB, repeated(3, emptyMsg, 1*M))...)
		}, http.StatusRequestEntityTooLarge, "0", 16*M + 24*128<<10},
		{"v2 histograms at the bucket limit", ctV2, Limits{MaxBucketsPerHistogram: 4096, MaxHistogramBytesPerRequest: 16 * M}, func() []byte {
			h := append(pbBytes(nil, 11, []byte{2 << 3, 0xff, 0x1f}), pbBytes(nil, 12, make([]byte, 4095))...) // 1 span + 4095 buckets
			return append(v2Symbols(), series2(refsAB, repeated(3, h, 1024))...)
		}, http.StatusRequestEntityTooLarge, "0", 16 * M},
		{"v2 millions of label refs", ctV2, Limits{}, func() []byte {
			return append(v2Symbols(), series2(pbBytes(nil, 1, make([]byte, 16*M)), pbBytes(nil, 2, sample1))...)
		}, http.StatusBadRequest, "0", 0},
		{"v2 exemplar of millions of label refs", ctV2, Limits{}, func() []byte {
			ex := pbBytes(nil, 1, make([]byte, 16*M))
			return append(v2Symbols(), series2(refsAB, pbBytes(nil, 2, sample1), pbBytes(nil, 4, ex))...)
		}, http.StatusBadRequest, "1", 0},
		{"v1 empty samples", ctV1, Limits{MaxSamplesPerRequest: 100_000}, func() []byte {
			return series1(pbBytes(nil, 1, labelAB), repeated(2, emptyMsg, 8*M))
		}, http.StatusRequestEntityTooLarge, "", 0},
		{"v1 empty labels", ctV1, Limits{}, func() []byte {
			return series1(repeated(1, emptyMsg, 4*M), pbBytes(nil, 2, sample1))
		}, http.StatusBadRequest, "", 0},
		{"v1 exemplar of empty labels", ctV1, Limits{}, func() []byte {
			return series1(pbBytes(nil, 1, labelAB), pbBytes(nil, 2, sample1), pbBytes(nil, 3, repeated(1, emptyMsg, 4*M)))
		}, http.StatusNoContent, "", 0},
		{"v1 histogram of empty spans", ctV1, Limits{}, func() []byte {
			return series1(pbBytes(nil, 1, labelAB), pbBytes(nil, 4, repeated(8, emptyMsg, 4*M)))
		}, http.StatusBadRequest, "", 0},
		{"v1 empty histograms", ctV1, Limits{MaxHistogramBytesPerRequest: 16 * M}, func() []byte {
			return series1(pbBytes(nil, 1, labelAB), repeated(4, emptyMsg, 1*M))
		}, http.StatusRequestEntityTooLarge, "", 16*M + 24*128<<10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testServer(t, &recordingAppender{}, tc.lim, nil)
			raw := tc.raw()
			body := snappy.Encode(nil, raw)
			var r result
			allocated, peak := memDuring(func() { r = post(t, srv.URL, tc.ct, "snappy", body) })
			t.Logf("%d bytes compressed, %d decoded: allocated %.1f MiB, peak heap growth %.1f MiB; status %d %q",
				len(body), len(raw), float64(allocated)/M, float64(peak)/M, r.status, strings.TrimSpace(r.body))
			expectStatus(t, r, tc.status)
			if tc.ct == ctV2 {
				expectWritten(t, r, tc.written, "0", "0")
			}
			if bound := uint64(len(raw)+16*M) + tc.histBytes; allocated > bound {
				t.Errorf("the request allocated %.1f MiB, want < %.1f MiB (its decoded size + 16 MiB + %.1f MiB of histograms)",
					float64(allocated)/M, float64(bound)/M, float64(tc.histBytes)/M)
			}
		})
	}
}

// TestWriteHugeContentLength: a request claiming a 32 MiB body (within
// MaxBodyBytes) that sends a few bytes costs a few bytes: the body buffer
// grows as bytes arrive, not to the Content-Length up front.
func TestWriteHugeContentLength(t *testing.T) {
	srv := testServer(t, &recordingAppender{}, Limits{}, nil)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var status string
	allocated, _ := memDuring(func() {
		fmt.Fprintf(conn, "POST /api/v1/write HTTP/1.1\r\nHost: tandem\r\nContent-Type: %s\r\nContent-Encoding: snappy\r\nContent-Length: %d\r\n\r\n",
			ctV2, DefaultMaxBodyBytes)
		for range 10 { // a slow sender
			_, _ = conn.Write([]byte("0123456789"))
			time.Sleep(5 * time.Millisecond)
		}
		_ = conn.(*net.TCPConn).CloseWrite() // the body ends early: the handler answers 400
		buf := make([]byte, 512)
		n, _ := conn.Read(buf)
		status, _, _ = strings.Cut(string(buf[:n]), "\r\n")
	})
	t.Logf("allocated %d KiB; %s", allocated>>10, status)
	if !strings.Contains(status, " 400 ") {
		t.Errorf("status line %q, want 400 (the body ended before its Content-Length)", status)
	}
	if allocated > 4<<20 {
		t.Errorf("the request allocated %d KiB, want < 4 MiB", allocated>>10)
	}
}

func TestWriteTooManySamples(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{MaxSamplesPerRequest: 10}, nil)
	ss1 := func(n int) []prompb.Sample {
		var ss []prompb.Sample
		for i := range n {
			ss = append(ss, prompb.Sample{Timestamp: int64(i + 1), Value: 1})
		}
		return ss
	}
	req1 := func(samples, exemplars int) *prompb.WriteRequest {
		ts := v1Series([]string{"__name__", "m"}, ss1(samples)...)
		for i := range exemplars {
			ts.Exemplars = append(ts.Exemplars, prompb.Exemplar{Labels: []prompb.Label{{Name: "trace_id", Value: "x"}}, Timestamp: int64(i + 1)})
		}
		return &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts}}
	}
	expectStatus(t, postV1(t, srv.URL, req1(11, 0)), http.StatusRequestEntityTooLarge)
	expectStatus(t, postV1(t, srv.URL, req1(6, 5)), http.StatusRequestEntityTooLarge) // exemplars count too
	expectStatus(t, postV1(t, srv.URL, req1(5, 5)), http.StatusNoContent)

	req2 := func(samples, histograms int) *writev2.Request {
		b := newV2Builder()
		var ss []writev2.Sample
		for i := range samples {
			ss = append(ss, writev2.Sample{Timestamp: int64(i + 100), Value: 1})
		}
		ts := b.add([]string{"__name__", "m"}, ss...)
		for i := range histograms {
			ts.Histograms = append(ts.Histograms, writev2.Histogram{Timestamp: int64(i + 1)})
		}
		return b.build()
	}
	r := postV2(t, srv.URL, req2(11, 0))
	expectStatus(t, r, http.StatusRequestEntityTooLarge)
	expectWritten(t, r, "0", "0", "0")
	expectStatus(t, postV2(t, srv.URL, req2(9, 2)), http.StatusRequestEntityTooLarge) // histograms count too
	expectStatus(t, postV2(t, srv.URL, req2(10, 0)), http.StatusNoContent)
	if n := app.samples(); n != 15 {
		t.Errorf("%d samples written, want 15", n)
	}
}

func TestWriteTooManySymbols(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{MaxSymbolsPerRequest: 5}, nil)
	b := newV2Builder()
	b.add([]string{"__name__", "m", "a", "b"}, writev2.Sample{Timestamp: 1, Value: 1}) // "", __name__, m, a, b
	expectStatus(t, postV2(t, srv.URL, b.build()), http.StatusNoContent)
	b.add([]string{"__name__", "m", "a", "c"}, writev2.Sample{Timestamp: 1, Value: 1})
	r := postV2(t, srv.URL, b.build())
	expectStatus(t, r, http.StatusRequestEntityTooLarge)
	expectWritten(t, r, "0", "0", "0")
}

// TestWriteExemplarTooManyLabels: an exemplar with more labels than
// MaxLabelsPerSeries is not written (the rest of the request is).
func TestWriteExemplarTooManyLabels(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{MaxLabelsPerSeries: 2}, nil)
	b := newV2Builder()
	ts := b.add([]string{"__name__", "m"}, writev2.Sample{Timestamp: 1, Value: 1})
	ts.Exemplars = []writev2.Exemplar{
		{LabelsRefs: b.refs([]string{"a", "1", "b", "2"}), Timestamp: 1},
		{LabelsRefs: b.refs([]string{"a", "1", "b", "2", "c", "3"}), Timestamp: 2},
	}
	r := postV2(t, srv.URL, b.build())
	expectStatus(t, r, http.StatusBadRequest)
	expectWritten(t, r, "1", "0", "1")

	s := v1Series([]string{"__name__", "m"}, prompb.Sample{Timestamp: 2, Value: 1})
	s.Exemplars = []prompb.Exemplar{{Labels: []prompb.Label{{Name: "a", Value: "1"}, {Name: "b", Value: "2"}, {Name: "c", Value: "3"}}, Timestamp: 2}}
	expectStatus(t, postV1(t, srv.URL, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{s}}), http.StatusNoContent)
	if n := app.exemplars(); n != 1 {
		t.Errorf("%d exemplars written, want 1", n)
	}
}

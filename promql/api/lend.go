package api

import (
	"net/http"
	"sync"

	"github.com/prometheus/prometheus/promql"
	v1 "github.com/prometheus/prometheus/web/api/v1"
)

// The JSON of a large answer (a range query of hundreds of series) is
// encoded into a buffer lent to the response rather than given away:
// Prometheus's respond writes the codec's bytes at once, in one Write,
// through the writer compressResponses installs, and that writer hands the
// buffer back once written (an io.Writer keeps nothing of what it was
// given). The next large answer is encoded into it instead of growing a new
// buffer from 256 kB, which allocated ~1 MB a query for an answer of 200
// series × 180 points, half of all that query allocated. Buffers never
// handed back (an answer written by some other path) are bounded: lending
// stops while maxLent are out, and answers are then given away as before.
const (
	lendMin = 256 << 10 // smaller answers are copied out of the pooled encoder
	lendMax = 8 << 20   // larger buffers are not kept
	maxLent = 4         // buffers out at once
	maxIdle = 2         // buffers kept for the next large answers
)

var lending struct {
	mu   sync.Mutex
	out  map[*byte]struct{} // first bytes of the buffers lent
	idle [][]byte
}

// largeAnswer reports whether resp is a matrix of enough points that its
// JSON is likely larger than lendMin (~32 bytes a point and more).
func largeAnswer(resp *v1.Response) bool {
	d, ok := resp.Data.(*v1.QueryData)
	if !ok || d == nil {
		return false
	}
	m, ok := d.Result.(promql.Matrix)
	if !ok {
		return false
	}
	points := 0
	for i := range m {
		if points += len(m[i].Floats) + len(m[i].Histograms); points >= lendMin/32 {
			return true
		}
	}
	return false
}

// idleBuffer returns a buffer kept from an earlier large answer, nil if
// there is none.
func idleBuffer() []byte {
	lending.mu.Lock()
	defer lending.mu.Unlock()
	n := len(lending.idle)
	if n == 0 {
		return nil
	}
	b := lending.idle[n-1]
	lending.idle[n-1] = nil
	lending.idle = lending.idle[:n-1]
	return b
}

// keepIdle keeps b (emptied) for a later answer, if there is room.
func keepIdle(b []byte) {
	if cap(b) < lendMin || cap(b) > lendMax {
		return
	}
	lending.mu.Lock()
	if len(lending.idle) < maxIdle {
		lending.idle = append(lending.idle, b[:0])
	}
	lending.mu.Unlock()
}

// lend records b as lent to the response that writes it; false when too
// many are out or b is too large to keep, and b is then simply given away.
func lend(b []byte) bool {
	if len(b) == 0 || cap(b) > lendMax {
		return false
	}
	lending.mu.Lock()
	defer lending.mu.Unlock()
	if len(lending.out) >= maxLent {
		return false
	}
	if lending.out == nil {
		lending.out = map[*byte]struct{}{}
	}
	lending.out[&b[0]] = struct{}{}
	return true
}

// giveBack takes back p, just written, if it is a lent buffer.
func giveBack(p []byte) {
	if len(p) < lendMin {
		return
	}
	lending.mu.Lock()
	_, ok := lending.out[&p[0]]
	if ok {
		delete(lending.out, &p[0])
	}
	lending.mu.Unlock()
	if ok {
		keepIdle(p)
	}
}

// givingBack is the response writer of an uncompressed answer: it hands
// lent buffers back once written.
type givingBack struct{ http.ResponseWriter }

func (g givingBack) Write(p []byte) (int, error) {
	n, err := g.ResponseWriter.Write(p)
	giveBack(p)
	return n, err
}

// Flush flushes the connection's writer, when it can.
func (g givingBack) Flush() { _ = http.NewResponseController(g.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the connection's writer.
func (g givingBack) Unwrap() http.ResponseWriter { return g.ResponseWriter }

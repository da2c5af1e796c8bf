package api

import (
	"net/http"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
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

// largeAnswer reports whether resp's JSON is likely larger than lendMin: a
// matrix of lendMin/32 points or more, or a vector or series list of
// lendMin/64 series or more (each at least that many bytes).
func largeAnswer(resp *v1.Response) bool {
	switch d := resp.Data.(type) {
	case *v1.QueryData:
		if d == nil {
			return false
		}
		switch r := d.Result.(type) {
		case promql.Matrix:
			points := 0
			for i := range r {
				if points += len(r[i].Floats) + len(r[i].Histograms); points >= lendMin/32 {
					return true
				}
			}
		case promql.Vector:
			return len(r) >= lendMin/64
		}
	case []labels.Labels:
		return len(d) >= lendMin/64
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

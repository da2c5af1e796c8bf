package limits

import (
	"sync"
	"time"
)

// Bucket is a token bucket for one tenant's ingestion rate. A write of n
// samples is admitted when the bucket holds n tokens; a write larger than
// the burst is admitted when the bucket is full and leaves it in debt, so
// that the tenant is still held to its rate.
type Bucket struct {
	mu     sync.Mutex
	rate   float64 // tokens per second; 0 = unlimited
	burst  float64
	tokens float64
	last   time.Time
}

// Set changes the bucket's rate and burst (tokens kept, capped at the new burst).
func (b *Bucket) Set(rate, burst float64, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last.IsZero() || b.rate == 0 {
		b.tokens, b.last = burst, now
	}
	b.refill(now)
	b.rate, b.burst = rate, burst
	b.tokens = min(b.tokens, burst)
}

func (b *Bucket) refill(now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
}

// Take admits n tokens at now, or returns false and how long until it
// would admit them.
func (b *Bucket) Take(n int, now time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rate <= 0 {
		return true, 0
	}
	b.refill(now)
	need := min(float64(n), b.burst)
	if b.tokens < need {
		return false, time.Duration((need-b.tokens)/b.rate*float64(time.Second)) + time.Millisecond
	}
	b.tokens -= float64(n)
	return true, 0
}

package workload

import (
	"math"
	"testing"
)

func TestRoundedNormalBits(t *testing.T) {
	for _, c := range []struct {
		mu, sd, q float64
		clip      bool
		want, tol float64
	}{
		{0, 0, 1, false, 0, 0},     // constant
		{5, 1e-12, 1, false, 0, 0}, // no spread
		{1000, 100, 1, false, math.Log2(100 * math.Sqrt(2*math.Pi*math.E)), 1e-3}, // wide: continuous limit
		{1e9, 1e7, 1, false, math.Log2(1e7 * math.Sqrt(2*math.Pi*math.E)), 1e-3},  // very wide (integrated)
		// Clipped at the mean: half the mass at zero (half a bit), the other
		// half spread as wide as before.
		{0, 1e7, 1, true, 0.5 + 0.5*math.Log2(1e7*math.Sqrt(2*math.Pi*math.E)), 0.01},
		{0, 1e2, 1, true, 0.5 + 0.5*math.Log2(1e2*math.Sqrt(2*math.Pi*math.E)), 0.03}, // discrete: zero also takes (0, 0.5)
		{0, 1e-3, 1, true, 0, 1e-6}, // always zero
		{0.5, 1e-9, 1, false, 0, 0},
	} {
		got := roundedNormalBits(c.mu, c.sd, c.q, c.clip)
		if math.Abs(got-c.want) > c.tol {
			t.Errorf("roundedNormalBits(%g, %g, %g, %v) = %.4f, want %.4f", c.mu, c.sd, c.q, c.clip, got, c.want)
		}
	}
}

func TestEntropyBytesPerSample(t *testing.T) {
	g, err := NewGenerator(Options{Targets: 1, Scrapes: 2, Histogram: true})
	if err != nil {
		t.Fatal(err)
	}
	h := g.EntropyBytesPerSample()
	// The node_exporter model: most series constant, gauges of memory and
	// filesystem bytes at 3–5 bytes each; about a third of a byte overall.
	if h < 0.2 || h > 0.6 {
		t.Fatalf("entropy floor %.3f bytes/sample", h)
	}
	t.Logf("entropy floor of the generated values: %.3f bytes/sample", h)
}

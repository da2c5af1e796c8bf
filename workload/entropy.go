package workload

import "math"

// EntropyBytesPerSample is a lower bound on the bytes per sample any lossless
// encoding needs for the values this generator produces: the entropy of each
// generated value given everything before it, averaged over a target's
// series. Gauges are independent draws around their mean, rounded (entropy
// of a rounded normal); a counter's increase over one interval is a rounded
// normal clipped at zero, averaged over the per-target rate scale (0.5–1.5);
// constants cost nothing. The synthetic histogram's series are counted as
// free, and timestamps, labels and index too: real encodings pay for those
// on top.
func (g *Generator) EntropyBytesPerSample() float64 {
	dt := g.opts.Interval.Seconds()
	bits := 0.0
	for i := range g.opts.Templates {
		tm := &g.opts.Templates[i]
		if tm.histKind != histNone {
			continue
		}
		q := tm.quantum()
		switch tm.Behaviour {
		case Gauge:
			bits += roundedNormalBits(tm.Mean, math.Max(tm.Spread, math.Abs(tm.Mean)*0.01), q, false)
		case Counter:
			const steps = 20
			for i := range steps {
				sc := 0.5 + (float64(i)+0.5)/steps
				bits += roundedNormalBits(sc*tm.Rate*dt, sc*tm.RateSD*dt, q, true) / steps
			}
		}
	}
	return bits / 8 / float64(len(g.opts.Templates))
}

// roundedNormalBits is the entropy in bits of a normal variable (mean mu,
// deviation sd) rounded to a multiple of q; with clip, values below zero
// count as zero.
func roundedNormalBits(mu, sd, q float64, clip bool) float64 {
	m, s := mu/q, sd/q
	if s <= 1e-9 {
		return 0
	}
	cdf := func(x float64) float64 { return 0.5 * math.Erfc((m-x)/(s*math.Sqrt2)) }
	lo, hi := math.Floor(m-12*s)-1, math.Ceil(m+12*s)+1
	if clip {
		lo = max(lo, 0)
	}
	h := 0.0
	if s > 1e3 {
		// Wide: the rounded values are as many as the density's
		// (-Σ p log p ≈ -∫ f log f), integrated in steps of s/100.
		if clip && lo == 0 {
			if p0 := cdf(0.5); p0 > 0 {
				h -= p0 * math.Log2(p0)
			}
			lo = 0.5
		}
		w := s / 100
		for x := lo + w/2; x < hi; x += w {
			z := (x - m) / s
			f := math.Exp(-z*z/2) / (s * math.Sqrt(2*math.Pi))
			if f > 0 {
				h -= f * w * math.Log2(f)
			}
		}
		return h
	}
	for k := lo; k <= hi; k++ {
		p := cdf(k+0.5) - cdf(k-0.5)
		if clip && k == 0 {
			p = cdf(0.5) // everything below rounds to zero
		}
		if p > 0 {
			h -= p * math.Log2(p)
		}
	}
	return h
}

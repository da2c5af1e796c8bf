package pushdown

import "testing"

// TestAccPages: every group of every shape of page has its own zeroed
// accumulators, full slices of steps that do not reach the next group's,
// and pages given back come out zeroed again.
func TestAccPages(t *testing.T) {
	for _, steps := range []int{1, 7, 61, pageAccs, pageAccs + 3} {
		p := newAccPages(steps)
		for round := range 2 {
			const groups = 300
			for n := 1; n <= groups; n += 37 {
				p.grow(n)
			}
			p.grow(groups)
			if p.groups != groups {
				t.Fatalf("steps %d: %d groups, want %d", steps, p.groups, groups)
			}
			for gi := range groups {
				g := p.group(gi)
				if len(g) != steps || cap(g) != steps {
					t.Fatalf("steps %d group %d: len %d cap %d", steps, gi, len(g), cap(g))
				}
				for k := range g {
					if g[k] != (acc{}) {
						t.Fatalf("steps %d round %d group %d step %d: not zeroed: %+v", steps, round, gi, k, g[k])
					}
					g[k].v, g[k].seen = float64(gi*steps+k), true
				}
			}
			for gi := range groups {
				for k, a := range p.group(gi) {
					if a.v != float64(gi*steps+k) {
						t.Fatalf("steps %d group %d step %d: %v, overwritten by another group", steps, gi, k, a.v)
					}
				}
			}
			p.release()
			if len(p.pages) != 0 || p.groups != 0 {
				t.Fatalf("steps %d: release left %d pages, %d groups", steps, len(p.pages), p.groups)
			}
		}
	}
}

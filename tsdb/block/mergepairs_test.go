package block

import (
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// TestMergePairs checks that a series' own pairs and its group's shared ones
// come out in label order, and are sorted when a record has them out of order.
func TestMergePairs(t *testing.T) {
	p := func(kv ...string) []symPair {
		var out []symPair
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, symPair{kv[i], kv[i+1]})
		}
		return out
	}
	for _, c := range []struct {
		own, common []symPair
		want        labels.Labels
	}{
		{p("__name__", "up", "mode", "idle"), p("instance", "a", "job", "n"),
			labels.FromStrings("__name__", "up", "instance", "a", "job", "n", "mode", "idle")},
		{nil, p("instance", "a"), labels.FromStrings("instance", "a")},
		{p("a", "1"), nil, labels.FromStrings("a", "1")},
		{p("z", "1", "b", "2"), p("m", "3"), labels.FromStrings("b", "2", "m", "3", "z", "1")}, // out of order
		{p("b", "1"), p("z", "3", "a", "2"), labels.FromStrings("a", "2", "b", "1", "z", "3")},
	} {
		var lb labels.ScratchBuilder
		mergePairs(&lb, c.own, c.common)
		if got := lb.Labels(); !labels.Equal(got, c.want) {
			t.Errorf("own %v common %v: got %v, want %v", c.own, c.common, got, c.want)
		}
	}
}

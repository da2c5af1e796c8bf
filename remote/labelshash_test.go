package remote

import (
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
)

// TestLabelsHash: the decoder hashes sorted labels as sent (1.0 and 2.0)
// to what labels.Labels.Hash returns, the key the head finds series by,
// across the packed encoding's length boundaries.
func TestLabelsHash(t *testing.T) {
	long := func(n int) string { return strings.Repeat("v", n) }
	sets := []labels.Labels{
		labels.FromStrings("__name__", "up"),
		labels.FromStrings("__name__", "up", "instance", "h:9100", "job", "node"),
		labels.FromStrings("__name__", "up", "a", long(254)),
		labels.FromStrings("__name__", "up", "a", long(255)),
		labels.FromStrings("__name__", "up", "a", long(70000)),
		labels.FromStrings("__name__", "up", long(300), "é"),
	}
	d := newDecoder(Limits{})
	for _, ls := range sets {
		var v1 v1Labels
		v2 := v2Labels{syms: []string{""}}
		ls.Range(func(l labels.Label) {
			v1 = append(v1, prompb.Label{Name: l.Name, Value: l.Value})
			v2.refs = append(v2.refs, uint32(len(v2.syms)), uint32(len(v2.syms)+1))
			v2.syms = append(v2.syms, l.Name, l.Value)
		})
		if got, want := d.labelsHash(v1), ls.Hash(); got != want {
			t.Errorf("1.0 %.60s: hash %x, want %x", ls, got, want)
		}
		if got, want := d.labelsHash(v2), ls.Hash(); got != want {
			t.Errorf("2.0 %.60s: hash %x, want %x", ls, got, want)
		}
	}
	if d.labelsHash(v1Labels{{Name: "b", Value: "1"}, {Name: "a", Value: "2"}}) == labels.FromStrings("a", "2", "b", "1").Hash() {
		t.Error("unsorted labels hashed as if sorted")
	}
}

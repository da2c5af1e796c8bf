//go:build slicelabels || dedupelabels

package remote

import "github.com/prometheus/prometheus/model/labels"

// matchLbuf reports whether lset equals the 1.0 labels being decoded.
func (d *decoder) matchLbuf(lset labels.Labels) bool {
	if d.parseLbuf() != nil {
		return false // the caller parses again and fails the request
	}
	return rangeEqual(lset, v1Labels(d.lbuf))
}

// matchV2Labels reports whether lset is exactly the labels of d.v2cur, in order.
func (d *decoder) matchV2Labels(lset labels.Labels) bool {
	return rangeEqual(lset, d.v2cur)
}

func rangeEqual(lset labels.Labels, ls labelSource) bool {
	i, n, ok := 0, ls.Len(), true
	lset.Range(func(l labels.Label) {
		if !ok {
			return
		}
		if i >= n {
			ok = false
			return
		}
		name, value := ls.At(i)
		ok = name == l.Name && value == l.Value
		i++
	})
	return ok && i == n
}

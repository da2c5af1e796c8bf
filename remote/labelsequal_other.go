//go:build slicelabels || dedupelabels

package remote

import (
	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/prometheus/model/labels"
)

// seriesLabels returns the labels of a new series, in the order sent.
func seriesLabels[S labelSource](d *decoder, ls S) labels.Labels {
	d.sb.Reset()
	for i := 0; i < ls.Len(); i++ {
		d.sb.Add(ls.At(i))
	}
	return d.sb.Labels()
}

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

// labelsHash returns what labels.Labels.Hash returns for the labels of ls,
// in the order sent: the hash of each name and value followed by 0xff.
func (d *decoder) labelsHash(ls labelSource) uint64 {
	b := d.hbuf[:0]
	for i := 0; i < ls.Len(); i++ {
		n, v := ls.At(i)
		b = append(append(append(append(b, n...), 0xff), v...), 0xff)
	}
	d.hbuf = b
	return xxhash.Sum64(b)
}

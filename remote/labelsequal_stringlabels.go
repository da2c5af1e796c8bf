//go:build !slicelabels && !dedupelabels

package remote

import "github.com/prometheus/prometheus/model/labels"

// The matchers read a stored series' packed labels (Labels.Bytes) rather than
// calling Range, so a known series is checked without a closure call per label.

// matchLbuf reports whether lset equals the 1.0 labels being decoded.
func (d *decoder) matchLbuf(lset labels.Labels) bool {
	data := lset.Bytes(d.lsetBuf)
	d.lsetBuf = data
	i, ok := 0, true
	for k := range d.lbuf {
		if i, ok = packedHas(data, i, d.lbuf[k].Name); !ok {
			return false
		}
		if i, ok = packedHas(data, i, d.lbuf[k].Value); !ok {
			return false
		}
	}
	return i == len(data)
}

// matchV2Labels reports whether lset is exactly the labels of d.v2cur, in order.
func (d *decoder) matchV2Labels(lset labels.Labels) bool {
	data := lset.Bytes(d.lsetBuf)
	d.lsetBuf = data
	i, ok := 0, true
	refs, syms := d.v2cur.refs, d.v2cur.syms
	for k := 0; k+1 < len(refs); k += 2 {
		if i, ok = packedHas(data, i, syms[refs[k]]); !ok {
			return false
		}
		if i, ok = packedHas(data, i, syms[refs[k+1]]); !ok {
			return false
		}
	}
	return i == len(data)
}

// packedHas reports whether data holds s at offset i in the stringlabels
// packing (one length byte below 255, else 255 and three little-endian
// bytes, then the bytes) and returns the offset after it.
func packedHas(data []byte, i int, s string) (int, bool) {
	if i >= len(data) {
		return i, false
	}
	size := int(data[i])
	i++
	if size == 255 {
		if i+3 > len(data) {
			return i, false
		}
		size = int(data[i]) | int(data[i+1])<<8 | int(data[i+2])<<16
		i += 3
	}
	if size != len(s) || i+size > len(data) || string(data[i:i+size]) != s {
		return i, false
	}
	return i + size, true
}

//go:build !slicelabels && !dedupelabels

package remote

import (
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/prometheus/prometheus/model/labels"
)

// The matchers read a stored series' packed labels rather than calling
// Range, so a known series is checked without a closure call per label.

// packedLabels returns the packed form of ls: under stringlabels it is the
// struct's only field, read in place to save the copy Labels.Bytes makes
// (TestPackedLabels checks that both agree).
func packedLabels(ls labels.Labels) string {
	return *(*string)(unsafe.Pointer(&ls))
}

// seriesLabels returns the labels of a new series, in the order sent,
// packed into the decoder's label arena instead of a string of their own:
// the head copies the labels of the series it creates, so a request's
// million new series do not leave a million strings of garbage behind, in
// the same size classes as the copies the head keeps. They are valid until
// the decoder's next request, as the rest of its batch.
func seriesLabels[S labelSource](d *decoder, ls S) labels.Labels {
	start := len(d.larena)
	for i := 0; i < ls.Len(); i++ {
		n, v := ls.At(i)
		d.larena = appendPacked(appendPacked(d.larena, n), v)
	}
	// Growing the arena leaves the labels made before in the old array,
	// which nothing writes to any more.
	packed := d.larena[start:]
	var lset labels.Labels
	*(*string)(unsafe.Pointer(&lset)) = unsafe.String(unsafe.SliceData(packed), len(packed))
	return lset
}

// matchLbuf reports whether lset equals the 1.0 labels being decoded. It
// compares their protobuf bytes directly when they have the shape every
// sender writes, and parses them otherwise.
func (d *decoder) matchLbuf(lset labels.Labels) bool {
	data := packedLabels(lset)
	if !d.lbufOK && d.rawLabels != nil {
		if eq, ok := matchRawV1(data, d.rawLabels); ok {
			return eq
		}
	}
	if d.parseLbuf() != nil {
		return false // the caller parses again and fails the request
	}
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

// matchRawV1 compares the packed labels data with raw, the contiguous label
// fields of a 1.0 TimeSeries. ok is false if a field does not have the
// common shape (tag, one-byte length, name field, value field, each below
// 128 bytes); the labels must then be parsed.
func matchRawV1(data string, raw []byte) (eq, ok bool) {
	i := 0
	for len(raw) > 0 {
		if len(raw) < 6 || raw[0] != 1<<3|wireBytes || raw[1] >= 0x80 || raw[2] != 1<<3|wireBytes {
			return false, false
		}
		m, n := int(raw[1]), int(raw[3])
		if n >= 0x80 || 2+m > len(raw) || 6+n > 2+m || raw[4+n] != 2<<3|wireBytes {
			return false, false
		}
		v := int(raw[5+n])
		if v >= 0x80 || 6+n+v != 2+m {
			return false, false
		}
		// Below 128 bytes a name's and a value's packed forms are their raw
		// fields without the tags: the length byte, then the bytes.
		if i+2+n+v > len(data) || data[i:i+1+n] != str(raw[3:4+n]) || data[i+1+n:i+2+n+v] != str(raw[5+n:2+m]) {
			return false, true
		}
		i += 2 + n + v
		raw = raw[2+m:]
	}
	return i == len(data), true
}

// matchV2Labels reports whether lset is exactly the labels of d.v2cur, in order.
func (d *decoder) matchV2Labels(lset labels.Labels) bool {
	data := packedLabels(lset)
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
func packedHas(data string, i int, s string) (int, bool) {
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
	if size != len(s) || i+size > len(data) || data[i:i+size] != s {
		return i, false
	}
	return i + size, true
}

// labelsHash returns what labels.Labels.Hash returns for the labels of ls,
// in the order sent (sorted labels, as senders send them, find their series).
// Under stringlabels that is the hash of the packed form: each string
// preceded by its length, one byte below 255, else 255 and three bytes.
func (d *decoder) labelsHash(ls labelSource) uint64 {
	b := d.hbuf[:0]
	for i := 0; i < ls.Len(); i++ {
		n, v := ls.At(i)
		b = appendPacked(appendPacked(b, n), v)
	}
	d.hbuf = b
	return xxhash.Sum64(b)
}

func appendPacked(b []byte, s string) []byte {
	if n := len(s); n < 255 {
		b = append(b, byte(n))
	} else {
		b = append(b, 255, byte(n), byte(n>>8), byte(n>>16))
	}
	return append(b, s...)
}

//go:build !slicelabels && !dedupelabels

package block

import "unsafe"

// scratchString views b as a string for labels.ScratchBuilder.Add: with
// Prometheus's default (string) labels, ScratchBuilder.Labels copies every
// pair into the labels it returns, so the view need only last until then.
func scratchString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

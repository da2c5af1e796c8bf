//go:build slicelabels || dedupelabels

package block

// scratchString copies b: with these labels builds, the labels keep the
// strings passed to labels.ScratchBuilder.Add.
func scratchString(b []byte) string { return string(b) }

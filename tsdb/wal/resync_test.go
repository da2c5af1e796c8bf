package wal

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// frames returns the segment bytes of recs and each frame's offset.
func frames(recs [][]byte) ([]byte, []int64) {
	var seg []byte
	var offs []int64
	for _, r := range recs {
		offs = append(offs, int64(len(seg)))
		seg = appendFrame(seg, r)
	}
	return seg, offs
}

func scanAll(t *testing.T, seg []byte, budget func(int64) int64) ([][]byte, []Damage) {
	t.Helper()
	var got [][]byte
	damage, err := newReplayer(512, budget).scan(bytes.NewReader(seg), int64(len(seg)), false, func(_ int64, rec []byte) error {
		got = append(got, bytes.Clone(rec))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, damage
}

// TestResyncDropsOnlyDamagedBytes: damage in a segment costs the frames it
// touches, not the rest of the segment (before: everything after it).
func TestResyncDropsOnlyDamagedBytes(t *testing.T) {
	var recs [][]byte
	for i := range 200 {
		recs = append(recs, payload(i, 30+i*7%300))
	}
	seg, offs := frames(recs)
	except := func(lo, hi int) [][]byte { // recs without [lo, hi)
		return append(bytes2D(recs[:lo]), recs[hi:]...)
	}
	// first frame touched by byte range [a, b)
	touched := func(a, b int64) (int, int) {
		lo, hi := -1, 0
		for i, o := range offs {
			end := int64(len(seg))
			if i+1 < len(offs) {
				end = offs[i+1]
			}
			if o < b && end > a {
				if lo < 0 {
					lo = i
				}
				hi = i + 1
			}
		}
		return lo, hi
	}
	for _, tc := range []struct {
		name    string
		damage  func(b []byte) (int64, int64) // returns the damaged range
		records int                           // Damage.Records
	}{
		{"payload byte", func(b []byte) (int64, int64) {
			b[offs[50]+headerSize+3] ^= 0x40
			return offs[50] + headerSize + 3, offs[50] + headerSize + 4
		}, 1},
		{"crc byte", func(b []byte) (int64, int64) { b[offs[60]+5] ^= 1; return offs[60] + 5, offs[60] + 6 }, 1},
		{"length byte", func(b []byte) (int64, int64) { b[offs[70]+1] ^= 0x10; return offs[70] + 1, offs[70] + 2 }, -1},
		{"zeroed page", func(b []byte) (int64, int64) { clear(b[4096:8192]); return 4096, 8192 }, -1},
		{"random run", func(b []byte) (int64, int64) {
			for i := int64(10000); i < 10500; i++ {
				b[i] = byte(i*131 + 7)
			}
			return 10000, 10500
		}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(seg)
			a, e := tc.damage(b)
			lo, hi := touched(a, e)
			got, damage := scanAll(t, b, replayBudget)
			assertRecords(t, except(lo, hi), got)
			if len(damage) != 1 {
				t.Fatalf("damage %+v, want one run", damage)
			}
			d := damage[0]
			if d.Offset != offs[lo] || d.Offset+d.Bytes != offs[hi] || d.Tail || d.Records != tc.records {
				t.Fatalf("damage %+v, want offset %d, %d bytes, records %d", d, offs[lo], offs[hi]-offs[lo], tc.records)
			}
		})
	}
}

// TestResyncIgnoresFramesInsideARecord: a record may carry bytes that look
// like frames (a label value is any string). When that record is damaged,
// its own length skips them; and a lone embedded frame needs a valid
// successor to be taken.
func TestResyncIgnoresFramesInsideARecord(t *testing.T) {
	inner, _ := frames([][]byte{[]byte("forged one"), []byte("forged two")})
	host := append(append([]byte("label value: "), inner...), []byte(" end")...)
	recs := [][]byte{[]byte("before"), host, []byte("after")}
	seg, offs := frames(recs)
	b := bytes.Clone(seg)
	b[offs[1]+headerSize+2] ^= 0xff // damage the host record before the embedded frames
	got, _ := scanAll(t, b, replayBudget)
	assertRecords(t, [][]byte{recs[0], recs[2]}, got)

	// A single embedded frame, with its host's header damaged too.
	lone, _ := frames([][]byte{[]byte("forged")})
	host = append(append([]byte("xx"), lone...), []byte("yy")...)
	recs = [][]byte{[]byte("before"), host, []byte("after")}
	seg, offs = frames(recs)
	b = bytes.Clone(seg)
	b[offs[1]] ^= 0x01 // the host's length
	got, damage := scanAll(t, b, replayBudget)
	assertRecords(t, [][]byte{recs[0], recs[2]}, got)
	if len(damage) != 1 || damage[0].Offset != offs[1] || damage[0].Bytes != offs[2]-offs[1] {
		t.Fatalf("damage %+v", damage)
	}
}

// TestResyncTornTail: with no valid frame after the damage, the rest of the
// segment is one tail run.
func TestResyncTornTail(t *testing.T) {
	recs := [][]byte{payload(1, 100), payload(2, 100), payload(3, 100)}
	seg, offs := frames(recs)
	got, damage := scanAll(t, seg[:len(seg)-10], replayBudget)
	assertRecords(t, recs[:2], got)
	if len(damage) != 1 || !damage[0].Tail || damage[0].Offset != offs[2] || damage[0].Records != -1 {
		t.Fatalf("damage %+v", damage)
	}
}

// TestResyncBudget: the search gives up past its work bound, and replay then
// refuses to drop the unsearched rest of the last segment.
func TestResyncBudget(t *testing.T) {
	recs := [][]byte{payload(1, 100)}
	// A long run of frame headers of plausible lengths makes each offset cost a checksum.
	junk := bytes.Repeat([]byte{0x00, 0x01, 0, 0, 1, 2, 3, 4}, 4096)
	recs2 := [][]byte{payload(2, 100), payload(3, 100)}
	head, _ := frames(recs)
	tail, _ := frames(recs2)
	seg := append(append(bytes.Clone(head), junk...), tail...)
	got, damage := scanAll(t, seg, replayBudget)
	assertRecords(t, append(bytes2D(recs), recs2...), got)
	if len(damage) != 1 || damage[0].Bytes != int64(len(junk)) {
		t.Fatalf("damage %+v", damage)
	}
	_, damage = scanAll(t, seg, fixedBudget(1000))
	if len(damage) != 1 || !damage[0].Incomplete {
		t.Fatalf("damage %+v with a small budget, want an incomplete search", damage)
	}

	dir := t.TempDir()
	if err := os.WriteFile(segPath(dir, 0), seg, 0o666); err != nil {
		t.Fatal(err)
	}
	w := mustOpen(t, dir, Options{})
	defer w.Close()
	r := newReplayer(readBufSize, fixedBudget(1000))
	err := w.replaySegment(r, 0, true, func(int64, []byte) error { return nil })
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Offset != int64(len(head)) {
		t.Fatalf("replay with an exhausted search: %v, want *CorruptionError at %d", err, len(head))
	}
	if !bytes.Equal(mustRead(t, segPath(dir, 0)), seg) {
		t.Fatal("segment changed by a replay that gave up")
	}
}

func fixedBudget(n int64) func(int64) int64 { return func(int64) int64 { return n } }

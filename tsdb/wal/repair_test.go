package wal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// multiSegmentWAL writes n records over several segments of dir and returns
// them with the segment and offset of each.
func multiSegmentWAL(t *testing.T, dir string, n int) (recs [][]byte, segs []int, offs []int64) {
	t.Helper()
	for i := range n {
		recs = append(recs, payload(i, 40+i%60))
	}
	segs, offs = writeWAL(t, dir, 1024, recs)
	if segs[len(segs)-1] < 3 {
		t.Fatalf("bad test setup: %d segments", segs[len(segs)-1]+1)
	}
	return recs, segs, offs
}

func replayErr(t *testing.T, dir string) ([][]byte, error) {
	t.Helper()
	w := mustOpen(t, dir, Options{})
	defer w.Close()
	var got [][]byte
	err := w.Replay(func(rec []byte) error { got = append(got, bytes.Clone(rec)); return nil })
	return got, err
}

// TestRepairMiddleSegment: damage in a middle segment fails replay with a
// *CorruptionError; Repair keeps every valid record and replay then returns
// all records but the damaged one.
func TestRepairMiddleSegment(t *testing.T) {
	dir := t.TempDir()
	recs, segs, offs := multiSegmentWAL(t, dir, 100)
	// A record in the middle of segment 1.
	var idx []int
	for i, s := range segs {
		if s == 1 {
			idx = append(idx, i)
		}
	}
	victim := idx[len(idx)/2]
	flipByte(t, segPath(dir, 1), offs[victim]+headerSize+5, 0x22)

	_, err := replayErr(t, dir)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Segment != 1 || ce.Offset != offs[victim] || ce.Dir != dir {
		t.Fatalf("replay of a damaged middle segment: %v", err)
	}
	dry, err := Repair(dir, RepairOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replayErr(t, dir); err == nil {
		t.Fatal("a dry run repaired the WAL")
	}
	reps, err := Repair(dir, RepairOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != segs[len(segs)-1]+1 || len(dry) != len(reps) {
		t.Fatalf("%d reports (%d dry), want one per segment", len(reps), len(dry))
	}
	for _, r := range reps {
		if (r.Segment == 1) != (r.Action != "") {
			t.Fatalf("report %+v", r)
		}
	}
	r := reps[1]
	lost, exact := r.LostRecords()
	if r.LostBytes() != int64(len(recs[victim])+headerSize) || lost != 1 || !exact || r.Records != len(idx)-1 {
		t.Fatalf("segment 1 report: %+v (lost %d bytes, %d records)", r, r.LostBytes(), lost)
	}
	got, err := replayErr(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	assertRecords(t, append(bytes2D(recs[:victim]), recs[victim+1:]...), got)
	// Repairing a sound WAL changes nothing.
	reps, err = Repair(dir, RepairOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		if r.Action != "" {
			t.Fatalf("second repair: %+v", r)
		}
	}
}

// TestRepairMissingSegment: a segment moved away (as the old advice said)
// is replaced by an empty one; replay then returns the other segments' records.
func TestRepairMissingSegment(t *testing.T) {
	dir := t.TempDir()
	recs, segs, _ := multiSegmentWAL(t, dir, 100)
	if err := os.Rename(segPath(dir, 2), filepath.Join(t.TempDir(), "moved")); err != nil {
		t.Fatal(err)
	}
	_, err := replayErr(t, dir)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Segment != 2 {
		t.Fatalf("replay without segment 2: %v", err)
	}
	reps, err := Repair(dir, RepairOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := reps[2]; !r.Missing || r.Segment != 2 || r.Last != 2 || r.Action == "" {
		t.Fatalf("report for segment 2: %+v", r)
	}
	got, err := replayErr(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	for i, s := range segs {
		if s != 2 {
			want = append(want, recs[i])
		}
	}
	assertRecords(t, want, got)
}

// TestRepairWithCheckpoint: the log starts at checkpoint.N; segments missing
// after N get placeholders (replay reported them), and a checkpoint's own
// damaged segments are repaired too.
func TestRepairWithCheckpoint(t *testing.T) {
	dir := t.TempDir()
	recs, segs, _ := multiSegmentWAL(t, dir, 100)
	// A checkpoint replaced segments 0 and 1; segment 2 went missing.
	cpDir := filepath.Join(dir, fmt.Sprintf("checkpoint.%08d", 2))
	cpRecs := [][]byte{[]byte("cp a"), []byte("cp b"), []byte("cp c")}
	_, cpOffs := writeWAL(t, cpDir, 0, cpRecs)
	flipByte(t, segPath(cpDir, 0), cpOffs[1]+headerSize, 0x01)
	// The checkpoint's last segment repairs itself on replay; make it a middle one.
	if err := os.WriteFile(segPath(cpDir, 1), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	for _, s := range []int{0, 1, 2} {
		if err := os.Remove(segPath(dir, s)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := replayErr(t, dir)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Segment != 2 {
		t.Fatalf("replay without segment 2 after checkpoint.2: %v", err)
	}
	reps, err := Repair(dir, RepairOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) < 3 || reps[0].Dir != cpDir || len(reps[0].Damage) != 1 || !reps[2].Missing || reps[2].Segment != 2 {
		t.Fatalf("reports %+v", reps)
	}
	got, err := replayErr(t, cpDir)
	if err != nil {
		t.Fatal(err)
	}
	assertRecords(t, [][]byte{cpRecs[0], cpRecs[2]}, got)
	got, err = replayErr(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	for i, s := range segs {
		if s > 2 {
			want = append(want, recs[i])
		}
	}
	assertRecords(t, want, got)
}

// TestReplayChecksSegmentsAfterCheckpoint: segments deleted after the newest
// checkpoint are reported, not silently skipped.
func TestReplayChecksSegmentsAfterCheckpoint(t *testing.T) {
	for name, tc := range map[string]struct {
		cp   int
		segs []int
		bad  int
	}{
		"first after checkpoint missing": {cp: 3, segs: []int{4, 5}, bad: 3},
		"all missing":                    {cp: 3, bad: 3},
		"last before checkpoint":         {cp: 3, segs: []int{1, 2}, bad: 3},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, fmt.Sprintf("checkpoint.%08d", tc.cp)), 0o777); err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.segs {
				if err := os.WriteFile(segPath(dir, s), nil, 0o666); err != nil {
					t.Fatal(err)
				}
			}
			_, err := replayErr(t, dir)
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.Segment != tc.bad {
				t.Fatalf("replay: %v, want *CorruptionError for segment %d", err, tc.bad)
			}
			if _, err := Repair(dir, RepairOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := replayErr(t, dir); err != nil {
				t.Fatalf("replay after repair: %v", err)
			}
		})
	}
}

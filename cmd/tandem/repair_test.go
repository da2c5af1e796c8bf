package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/tsdb"
	"github.com/tandem-tsdb/tandem/tsdb/head"
	"github.com/tandem-tsdb/tandem/tsdb/wal"
)

// writeTestWAL logs n numbered records into <data>/wal over several segments.
func writeTestWAL(t *testing.T, data string, n int) [][]byte {
	t.Helper()
	w, err := wal.Open(filepath.Join(data, "wal"), wal.Options{SegmentSize: 1024, SyncInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var recs [][]byte
	for i := range n {
		r := fmt.Appendf(nil, "record %04d %s", i, strings.Repeat("x", i%50))
		if err := w.Log(r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return recs
}

func replayTestWAL(t *testing.T, data string) ([][]byte, error) {
	t.Helper()
	w, err := wal.Open(filepath.Join(data, "wal"), wal.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var got [][]byte
	err = w.Replay(func(r []byte) error { got = append(got, bytes.Clone(r)); return nil })
	return got, err
}

// segmentFrames returns the offset and length of every frame of a segment.
func segmentFrames(t *testing.T, path string) (offs []int64, lens []int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for o := 0; o+8 <= len(b); {
		n := int(binary.LittleEndian.Uint32(b[o:]))
		offs, lens = append(offs, int64(o)), append(lens, n)
		o += 8 + n
	}
	return offs, lens
}

// damageFrame flips a payload byte of the middle frame of a segment and
// returns that frame's payload.
func damageFrame(t *testing.T, path string) []byte {
	t.Helper()
	offs, lens := segmentFrames(t, path)
	i := len(offs) / 2
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	victim := bytes.Clone(b[offs[i]+8 : offs[i]+8+int64(lens[i])])
	b[offs[i]+8+int64(lens[i])/2] ^= 0x5a
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return victim
}

func without(recs [][]byte, drop func([]byte) bool) [][]byte {
	var out [][]byte
	for _, r := range recs {
		if !drop(r) {
			out = append(out, r)
		}
	}
	return out
}

func assertSameRecords(t *testing.T, want, got [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("replayed %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d: %q, want %q", i, got[i], want[i])
		}
	}
}

// TestTSDBRepairDamagedSegment: damage in the middle of a middle WAL segment
// stops replay with a *wal.CorruptionError; `tandem tsdb repair` (as a
// function, with a dry run first, then as the binary) keeps every readable
// record and reports what was lost; replay then returns every record but the
// damaged one.
func TestTSDBRepairDamagedSegment(t *testing.T) {
	data := t.TempDir()
	recs := writeTestWAL(t, data, 200)
	victim := damageFrame(t, filepath.Join(data, "wal", "00000002"))
	_, err := replayTestWAL(t, data)
	var ce *wal.CorruptionError
	if !errors.As(err, &ce) || ce.Segment != 2 {
		t.Fatalf("replay of a damaged middle segment: %v", err)
	}

	var out bytes.Buffer
	if err := runTSDB([]string{"repair", "--dry-run", "--storage.path=" + data}, &out); err == nil {
		t.Fatalf("dry run of a damaged WAL succeeded:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "00000002: DAMAGED") || !strings.Contains(out.String(), "dry run") {
		t.Fatalf("dry run output:\n%s", out.String())
	}
	if _, err := replayTestWAL(t, data); err == nil {
		t.Fatal("the dry run changed the WAL")
	}

	out.Reset()
	if err := runTSDB([]string{"repair", "--storage.path=" + data}, &out); err != nil {
		t.Fatalf("repair: %v\n%s", err, out.String())
	}
	t.Logf("repair output:\n%s", out.String())
	wantLine := fmt.Sprintf("00000002: DAMAGED: %d bytes and 1 record dropped", len(victim)+8)
	if !strings.Contains(out.String(), wantLine) || !strings.Contains(out.String(), "00000000: ok") {
		t.Fatalf("repair output lacks %q:\n%s", wantLine, out.String())
	}
	got, err := replayTestWAL(t, data)
	if err != nil {
		t.Fatal(err)
	}
	assertSameRecords(t, without(recs, func(r []byte) bool { return bytes.Equal(r, victim) }), got)

	// The binary: a second damaged segment.
	victim2 := damageFrame(t, filepath.Join(data, "wal", "00000004"))
	b, err := exec.Command(tandemBin, "tsdb", "repair", "--storage.path="+data).CombinedOutput()
	if err != nil || !strings.Contains(string(b), "00000004: DAMAGED") || !strings.Contains(string(b), "WAL repaired") {
		t.Fatalf("tandem tsdb repair: %v\n%s", err, b)
	}
	got, err = replayTestWAL(t, data)
	if err != nil {
		t.Fatal(err)
	}
	assertSameRecords(t, without(recs, func(r []byte) bool { return bytes.Equal(r, victim) || bytes.Equal(r, victim2) }), got)
	b, err = exec.Command(tandemBin, "tsdb", "repair", "--storage.path="+data).CombinedOutput()
	if err != nil || !strings.Contains(string(b), "nothing to repair") {
		t.Fatalf("repair of a sound WAL: %v\n%s", err, b)
	}
}

// TestTSDBRepairMissingSegment: a middle segment moved away, as the old
// start-up advice said, made start-up fail with "segment missing"; repair
// puts an empty one in its place and replay returns the other records.
func TestTSDBRepairMissingSegment(t *testing.T) {
	data := t.TempDir()
	recs := writeTestWAL(t, data, 200)
	seg := filepath.Join(data, "wal", "00000003")
	offs, _ := segmentFrames(t, seg)
	gone, err := replayAt(seg, len(offs))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(seg, filepath.Join(t.TempDir(), "00000003")); err != nil {
		t.Fatal(err)
	}
	if _, err := replayTestWAL(t, data); err == nil || !strings.Contains(err.Error(), "segment missing") {
		t.Fatalf("replay without segment 3: %v", err)
	}
	b, err := exec.Command(tandemBin, "tsdb", "repair", "--storage.path="+data).CombinedOutput()
	if err != nil || !strings.Contains(string(b), "00000003: MISSING") {
		t.Fatalf("tandem tsdb repair: %v\n%s", err, b)
	}
	got, err := replayTestWAL(t, data)
	if err != nil {
		t.Fatal(err)
	}
	assertSameRecords(t, without(recs, func(r []byte) bool { return gone[string(r)] }), got)
}

// replayAt returns the payloads of the n frames of a segment file.
func replayAt(path string, n int) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for o := 0; len(out) < n; {
		l := int(binary.LittleEndian.Uint32(b[o:]))
		out[string(b[o+8:o+8+l])] = true
		o += 8 + l
	}
	return out, nil
}

// TestTSDBRepairRefusesLockedDir: repair does not touch the WAL of a running tandem.
func TestTSDBRepairRefusesLockedDir(t *testing.T) {
	data := t.TempDir()
	writeTestWAL(t, data, 10)
	f, err := os.OpenFile(filepath.Join(data, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runTSDB([]string{"repair", "--storage.path=" + data}, &out); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("repair of a locked data directory: %v", err)
	}
}

// TestTSDBRepairHeadStarts: a head whose WAL is damaged in a middle segment
// does not start (nothing acknowledged is dropped silently); after `tandem
// tsdb repair` it starts with every sample but those of the damaged record.
func TestTSDBRepairHeadStarts(t *testing.T) {
	data := t.TempDir()
	opts := head.DefaultOptions()
	opts.WALSegmentSize = 2048
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	lset := labels.FromStrings("__name__", "repair_test", "job", "j", "instance", "i")
	base := time.Now().Add(-30 * time.Minute).UnixMilli()
	const n = 300
	db, err := tsdb.OpenDB(data, tsdb.DBOptions{Head: opts})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		// One record per batch; the series is defined in the first one.
		b := &head.Batch{Series: []head.BatchSeries{{Labels: lset, Samples: []head.Sample{{T: base + int64(i)*1000, V: float64(i)}}}}}
		if _, err := db.AppendBatch(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	walDir := filepath.Join(data, "wal")
	if segs, _ := filepath.Glob(filepath.Join(walDir, "0000000[3-9]")); len(segs) == 0 {
		t.Fatal("bad test setup: fewer than 4 WAL segments")
	}
	damageFrame(t, filepath.Join(walDir, "00000001"))
	_, err = tsdb.OpenDB(data, tsdb.DBOptions{Head: opts})
	var ce *wal.CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("start-up on a damaged WAL: %v, want a *wal.CorruptionError", err)
	}
	t.Logf("start-up error: %v", err)
	var out bytes.Buffer
	if err := runTSDB([]string{"repair", "--storage.path=" + data}, &out); err != nil {
		t.Fatalf("repair: %v\n%s", err, out.String())
	}
	db, err = tsdb.OpenDB(data, tsdb.DBOptions{Head: opts})
	if err != nil {
		t.Fatalf("start-up after repair: %v", err)
	}
	defer db.Close()
	q, err := db.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "repair_test"))
	got := 0
	for ss.Next() {
		it := ss.At().Iterator(nil)
		for it.Next() != 0 {
			got++
		}
	}
	if err := ss.Err(); err != nil {
		t.Fatal(err)
	}
	if got != n-1 {
		t.Fatalf("%d samples after repair, want %d (all but the damaged record's one)", got, n-1)
	}
}

package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/tsdb"
	"github.com/tandem-tsdb/tandem/tsdb/head"
	"github.com/tandem-tsdb/tandem/tsdb/wal"
)

// TestTSDBRepairLostSeriesRecord damages a record that defines a series in
// a middle segment: start-up fails with advice naming the repair command,
// and after the repair the head starts, dropping the samples it can no
// longer place instead of failing on them.
func TestTSDBRepairLostSeriesRecord(t *testing.T) {
	data := t.TempDir()
	opts := head.DefaultOptions()
	opts.WALSegmentSize = 2048
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	base := time.Now().Add(-30 * time.Minute).UnixMilli()
	db, err := tsdb.OpenDB(data, tsdb.DBOptions{Head: opts})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		// a new series every 10 records
		lset := labels.FromStrings("__name__", "lost", "job", "j", "instance", "i", "s", string(rune('a'+i/10)))
		b := &head.Batch{Series: []head.BatchSeries{{Labels: lset, Samples: []head.Sample{{T: base + int64(i)*1000, V: float64(i)}}}}}
		if _, err := db.AppendBatch(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	seg := filepath.Join(data, "wal", "00000001")
	offs, lens := segmentFrames(t, seg)
	// damage the first frame of the segment whose record defines a series (holds the label "s")
	b := mustReadFile(t, seg)
	for i := range offs {
		p := b[offs[i]+8 : offs[i]+8+int64(lens[i])]
		if bytes.Contains(p, []byte("instance")) {
			b[offs[i]+8+int64(lens[i])/2] ^= 0x5a
			break
		}
	}
	writeFileT(t, seg, b)
	_, err = tsdb.OpenDB(data, tsdb.DBOptions{Head: opts})
	var ce *wal.CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v", err)
	}
	if want := "tandem tsdb repair --storage.path=" + data; !strings.Contains(err.Error(), want) {
		t.Fatalf("start-up error %q does not say %q", err, want)
	}
	var out bytes.Buffer
	if err := runTSDB([]string{"repair", "--storage.path=" + data}, &out); err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	db, err = tsdb.OpenDB(data, tsdb.DBOptions{Head: opts})
	if err != nil {
		t.Fatalf("start-up after repair: %v", err)
	}
	db.Close()
}

func mustReadFile(t *testing.T, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFileT(t *testing.T, p string, b []byte) {
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

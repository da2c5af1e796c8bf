package wal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tandem-tsdb/tandem/internal/tmpfs"
)

// faultFS opens real files whose writes, fsyncs, truncations and creation
// fail while the matching error is set.
type faultFS struct {
	mu                                   sync.Mutex
	writeErr, syncErr, truncErr, openErr error
	partial                              int // bytes a failing write still writes
	// onSyncFail runs after an injected fsync failure (e.g. to drop pages).
	onSyncFail func(name string)
}

func (fs *faultFS) set(fn func(fs *faultFS)) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fn(fs)
}

func (fs *faultFS) open(name string, flag int, perm os.FileMode) (File, error) {
	fs.mu.Lock()
	err := fs.openErr
	fs.mu.Unlock()
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: f, fs: fs}, nil
}

type faultFile struct {
	*os.File
	fs *faultFS
}

func (f *faultFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	err, partial := f.fs.writeErr, f.fs.partial
	f.fs.mu.Unlock()
	if err == nil {
		return f.File.Write(p)
	}
	n, _ := f.File.Write(p[:min(partial, len(p))])
	return n, err
}

func (f *faultFile) Sync() error {
	f.fs.mu.Lock()
	err, hook := f.fs.syncErr, f.fs.onSyncFail
	f.fs.mu.Unlock()
	if err == nil {
		return f.File.Sync()
	}
	if hook != nil {
		hook(f.Name())
	}
	return err
}

func (f *faultFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	err := f.fs.truncErr
	f.fs.mu.Unlock()
	if err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func segmentFiles(t *testing.T, dir string) []int {
	t.Helper()
	segs, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

// rec returns the i-th test record.
func rec(i int) []byte { return []byte(fmt.Sprintf("record %04d", i)) }

// TestFsyncFailureRecovers: a failed fsync used to make the WAL refuse every
// write until a restart. Now the next Log re-writes the records not yet
// synced to a new segment (one, however often the retries fail), fsyncs it
// and goes on; replay returns every record Log acknowledged.
func TestFsyncFailureRecovers(t *testing.T) {
	for _, interval := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprintf("sync=%v", interval), func(t *testing.T) {
			dir := t.TempDir()
			fs := &faultFS{}
			var logs syncBuffer
			reg := prometheus.NewRegistry()
			w := mustOpen(t, dir, Options{SyncInterval: interval, OpenFile: fs.open, Logger: testLogger(&logs), Registerer: reg})
			var acked [][]byte
			logOK := func(i int) {
				t.Helper()
				if err := w.Log(rec(i)); err != nil {
					t.Fatalf("Log %d: %v", i, err)
				}
				acked = append(acked, rec(i))
			}
			logOK(0)
			logOK(1)
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			// The disk fails: the fsync fails and the kernel drops the pages
			// it could not write (here: the segment's unsynced tail is zeroed).
			eio := syscall.EIO
			synced := fileSize(t, segPath(dir, 0))
			fs.set(func(fs *faultFS) {
				fs.syncErr = eio
				fs.onSyncFail = func(name string) {
					if b, err := os.ReadFile(name); err == nil && int64(len(b)) > synced {
						clear(b[synced:])
						os.WriteFile(name, b, 0o666)
					}
				}
			})
			if interval == 0 {
				if err := w.Log(rec(2)); !errors.Is(err, eio) {
					t.Fatalf("Log with a failing fsync: %v", err)
				}
			} else {
				logOK(2) // written; the fsync comes later
				logOK(3)
				if err := w.Sync(); !errors.Is(err, eio) {
					t.Fatalf("Sync with a failing fsync: %v", err)
				}
			}
			if err := w.Healthy(); !errors.Is(err, eio) {
				t.Fatalf("Healthy after a failed fsync: %v", err)
			}
			if v := testutil.ToFloat64(w.metrics.failing); v != 1 {
				t.Fatalf("tandem_wal_failing = %v, want 1", v)
			}
			// While the fsync keeps failing every Log fails, and no segment
			// is left behind by the failed recoveries.
			for i := range 20 {
				if err := w.Log([]byte("refused")); err == nil {
					t.Fatalf("Log %d succeeded while fsync fails", i)
				}
			}
			if segs := segmentFiles(t, dir); len(segs) != 1 {
				t.Fatalf("segments %v while failing, want only [0]", segs)
			}
			if _, err := os.Stat(filepath.Join(dir, recoveryFile)); !os.IsNotExist(err) {
				t.Fatalf("recovery file left behind: %v", err)
			}
			// The disk is back: the next Log recovers without a restart.
			fs.set(func(fs *faultFS) { fs.syncErr = nil })
			logOK(10)
			logOK(11)
			if err := w.Healthy(); err != nil {
				t.Fatalf("Healthy after recovery: %v", err)
			}
			if v := testutil.ToFloat64(w.metrics.failing); v != 0 {
				t.Fatalf("tandem_wal_failing = %v after recovery, want 0", v)
			}
			if v := testutil.ToFloat64(w.metrics.recoveries); v != 1 {
				t.Fatalf("recoveries = %v, want 1", v)
			}
			if n := strings.Count(logs.String(), "WAL writable again"); n != 1 {
				t.Fatalf("recovery logged %d times, want once:\n%s", n, logs.String())
			}
			if segs := segmentFiles(t, dir); len(segs) != 2 {
				t.Fatalf("segments %v after recovery, want [0 1]", segs)
			}
			// The failed segment is cut back to what its last fsync covered.
			if got := fileSize(t, segPath(dir, 0)); got != synced {
				t.Fatalf("failed segment has %d bytes, want its synced %d", got, synced)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			want := acked
			if interval == 0 {
				// Record 2's Log failed, but it was written: it may come back.
				want = [][]byte{rec(0), rec(1), rec(2), rec(10), rec(11)}
			}
			w = mustOpen(t, dir, Options{})
			defer w.Close()
			assertRecords(t, want, replayAll(t, w))
		})
	}
}

// TestRecoveryCutFailsDuplicates: when the failed segment cannot be cut
// back, its unsynced records are replayed twice, identically.
func TestRecoveryCutFailsDuplicates(t *testing.T) {
	dir := t.TempDir()
	fs := &faultFS{}
	w := mustOpen(t, dir, Options{SyncInterval: time.Hour, OpenFile: fs.open})
	for i := range 3 {
		if err := w.Log(rec(i)); err != nil {
			t.Fatal(err)
		}
	}
	fs.set(func(fs *faultFS) { fs.syncErr = syscall.EIO })
	if err := w.Sync(); err == nil {
		t.Fatal("Sync succeeded")
	}
	fs.set(func(fs *faultFS) { fs.syncErr, fs.truncErr = nil, syscall.EIO })
	if err := w.Log(rec(3)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	w = mustOpen(t, dir, Options{})
	defer w.Close()
	assertRecords(t, [][]byte{rec(0), rec(1), rec(2), rec(0), rec(1), rec(2), rec(3)}, replayAll(t, w))
}

// TestWriteFailures: a failed write is removed from the segment and the next
// one goes on in it; if the partial frame cannot be removed, the next Log
// moves on to a new segment (before: the WAL refused writes until restart).
func TestWriteFailures(t *testing.T) {
	for _, cutFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("cutFails=%v", cutFails), func(t *testing.T) {
			dir := t.TempDir()
			fs := &faultFS{}
			w := mustOpen(t, dir, Options{SyncInterval: time.Hour, OpenFile: fs.open})
			if err := w.Log(rec(0)); err != nil {
				t.Fatal(err)
			}
			fs.set(func(fs *faultFS) {
				fs.writeErr, fs.partial = syscall.ENOSPC, 5
				if cutFails {
					fs.truncErr = syscall.EIO
				}
			})
			for range 3 {
				if err := w.Log(rec(1)); !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("Log on a full disk: %v", err)
				}
			}
			if w.Healthy() == nil {
				t.Fatal("Healthy while writes fail")
			}
			fs.set(func(fs *faultFS) { fs.writeErr, fs.truncErr = nil, nil })
			if err := w.Log(rec(2)); err != nil {
				t.Fatal(err)
			}
			if err := w.Healthy(); err != nil {
				t.Fatal(err)
			}
			want := 1
			if cutFails {
				want = 2
			}
			if segs := segmentFiles(t, dir); len(segs) != want {
				t.Fatalf("segments %v, want %d", segs, want)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			w = mustOpen(t, dir, Options{})
			defer w.Close()
			assertRecords(t, [][]byte{rec(0), rec(2)}, replayAll(t, w))
		})
	}
}

// TestSegmentCreationFails: a rotation that cannot create the next segment
// fails the Log and is retried with the same segment number.
func TestSegmentCreationFails(t *testing.T) {
	dir := t.TempDir()
	fs := &faultFS{}
	w := mustOpen(t, dir, Options{SegmentSize: 30, OpenFile: fs.open})
	if err := w.Log(rec(0)); err != nil {
		t.Fatal(err)
	}
	fs.set(func(fs *faultFS) { fs.openErr = syscall.ENOSPC })
	for range 5 {
		if err := w.Log(rec(1)); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Log without a segment: %v", err)
		}
	}
	fs.set(func(fs *faultFS) { fs.openErr = nil })
	if err := w.Log(rec(2)); err != nil {
		t.Fatal(err)
	}
	if segs := segmentFiles(t, dir); len(segs) != 2 || segs[1] != 1 {
		t.Fatalf("segments %v, want [0 1]", segs)
	}
	w.Close()
	w = mustOpen(t, dir, Options{})
	defer w.Close()
	assertRecords(t, [][]byte{rec(0), rec(2)}, replayAll(t, w))
}

// TestCloseRecovers: Close makes the records of a failed fsync durable if it can.
func TestCloseRecovers(t *testing.T) {
	dir := t.TempDir()
	fs := &faultFS{}
	w := mustOpen(t, dir, Options{SyncInterval: time.Hour, OpenFile: fs.open})
	if err := w.Log(rec(0)); err != nil {
		t.Fatal(err)
	}
	fs.set(func(fs *faultFS) { fs.syncErr = syscall.EIO })
	if err := w.Sync(); err == nil {
		t.Fatal("Sync succeeded")
	}
	fs.set(func(fs *faultFS) { fs.syncErr = nil })
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = mustOpen(t, dir, Options{})
	defer w.Close()
	assertRecords(t, [][]byte{rec(0)}, replayAll(t, w))
}

// TestFullFilesystem fills a real (tmpfs) file system: Log fails while it is
// full and succeeds again once space is freed, without a restart, and replay
// returns every record Log acknowledged.
func TestFullFilesystem(t *testing.T) {
	mnt := tmpfs.Mount(t, 2<<20)
	for _, interval := range []time.Duration{0, 10 * time.Millisecond} {
		t.Run(fmt.Sprintf("sync=%v", interval), func(t *testing.T) {
			dir := filepath.Join(mnt, fmt.Sprintf("wal-%d", interval))
			w := mustOpen(t, dir, Options{SegmentSize: 64 << 10, SyncInterval: interval})
			filler := filepath.Join(mnt, "filler")
			if err := os.WriteFile(filler, make([]byte, 1<<20), 0o666); err != nil {
				t.Fatal(err)
			}
			var acked [][]byte
			failures := 0
			for i := 0; failures < 20; i++ {
				r := payload(i, 1000+i%3000)
				if err := w.Log(r); err != nil {
					if !errors.Is(err, syscall.ENOSPC) {
						t.Fatalf("Log %d: %v", i, err)
					}
					failures++
					continue
				}
				if failures > 0 {
					t.Fatalf("Log %d succeeded on a full disk after %d failures", i, failures)
				}
				acked = append(acked, bytes.Clone(r))
			}
			if w.Healthy() == nil || len(acked) == 0 {
				t.Fatalf("Healthy on a full disk after %d records", len(acked))
			}
			segsFull := segmentFiles(t, dir)
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			for i := range 50 {
				r := payload(1_000_000+i, 500)
				if err := w.Log(r); err != nil {
					t.Fatalf("Log after space returned: %v", err)
				}
				acked = append(acked, r)
			}
			if err := w.Healthy(); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d records acknowledged, %d segments when full", len(acked), len(segsFull))
			w = mustOpen(t, dir, Options{})
			assertRecords(t, acked, replayAll(t, w))
			w.Close()
			os.RemoveAll(dir)
		})
	}
}

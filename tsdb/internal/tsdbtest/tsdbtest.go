// Package tsdbtest holds test helpers shared by the tests of tsdb and
// tsdb/head: a reference model of accepted samples and readers that check
// what a querier returns against it.
package tsdbtest

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// Model is the reference: every accepted sample per series.
type Model map[string]map[int64]uint64

func (m Model) Add(lset labels.Labels, t int64, v float64) {
	k := lset.String()
	if m[k] == nil {
		m[k] = map[int64]uint64{}
	}
	m[k][t] = math.Float64bits(v)
}

// ReadSeries reads every sample through q (closing it), checking that series
// come sorted, samples in increasing time order and within [mint, maxt].
func ReadSeries(t testing.TB, q storage.Querier, mint, maxt int64, ms ...*labels.Matcher) Model {
	t.Helper()
	defer q.Close()
	if len(ms) == 0 {
		ms = []*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+")}
	}
	ss := q.Select(context.Background(), true, nil, ms...)
	got := Model{}
	var prev labels.Labels
	var it chunkenc.Iterator
	for ss.Next() {
		s := ss.At()
		if !prev.IsEmpty() && labels.Compare(prev, s.Labels()) >= 0 {
			t.Fatalf("series not sorted: %s then %s", prev, s.Labels())
		}
		prev = s.Labels()
		it = s.Iterator(it)
		last := int64(math.MinInt64)
		for it.Next() == chunkenc.ValFloat {
			ts, v := it.At()
			if ts <= last {
				t.Fatalf("%s: timestamps not increasing: %d after %d", s.Labels(), ts, last)
			}
			if ts < mint || ts > maxt {
				t.Fatalf("%s: sample at %d outside [%d, %d]", s.Labels(), ts, mint, maxt)
			}
			last = ts
			got.Add(s.Labels(), ts, v)
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ss.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// CompareModels fails t for every difference between want and got.
func CompareModels(t testing.TB, want, got Model) {
	t.Helper()
	for k, ws := range want {
		gs := got[k]
		if len(gs) != len(ws) {
			t.Errorf("%s: %d samples, want %d", k, len(gs), len(ws))
		}
		for ts, v := range ws {
			if gv, ok := gs[ts]; !ok || gv != v {
				t.Errorf("%s at %d: got %x (present %v), want %x", k, ts, gv, ok, v)
				return
			}
		}
	}
	for k := range got {
		if want[k] == nil {
			t.Errorf("unexpected series %s", k)
		}
	}
}

// Series returns the labels of a series named name with more label pairs.
func Series(name string, kv ...string) labels.Labels {
	return labels.FromStrings(append([]string{"__name__", name}, kv...)...)
}

// CopyTree copies a directory tree.
func CopyTree(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// AsNobody runs f on an OS thread of its own whose effective user and group
// are nobody's (65534) when the test runs as root, so that file permissions
// apply (root ignores them); the thread ends with f. Other goroutines keep
// their credentials: Linux credentials are per thread, and the raw system
// calls change only the calling one (syscall.Setresuid would change all).
func AsNobody(t testing.TB, f func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		f()
		return
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		keep := ^uintptr(0)    // -1: leave that id unchanged
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESGID, keep, 65534, keep); e != 0 {
			errc <- fmt.Errorf("setresgid: %w", e)
			return
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, keep, 65534, keep); e != 0 {
			errc <- fmt.Errorf("setresuid: %w", e)
			return
		}
		defer func() { errc <- nil }()
		f()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// WriteFile writes s to p, failing t on error.
func WriteFile(t testing.TB, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// RemoveFile removes p, failing t on error.
func RemoveFile(t testing.TB, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}

// FlipByte flips a bit of the byte at off in file p (a damaged byte).
func FlipByte(t testing.TB, p string, off int) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x40
	WriteFile(t, p, string(b))
}

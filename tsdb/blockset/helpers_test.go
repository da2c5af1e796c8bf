package blockset

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// writeBlock writes a block of [mint, maxt) into dir holding one series with
// n samples (n ≤ maxt-mint) and returns its meta.
func writeBlock(t *testing.T, dir string, mint, maxt int64, n int, opts block.WriteOptions) block.Meta {
	t.Helper()
	tab := block.Table{Columns: []block.Column{{Member: 0}}}
	for i := range n {
		tab.Timestamps = append(tab.Timestamps, mint+int64(i))
		tab.Columns[0].Rows = append(tab.Columns[0].Rows, int32(i))
		tab.Columns[0].Values = append(tab.Columns[0].Values, float64(i*i%97))
	}
	g := block.Group{Key: "g", Members: []labels.Labels{labels.FromStrings("__name__", "m", "job", "j")}, Tables: []block.Table{tab}}
	meta, err := block.Write(dir, mint, maxt, block.Groups([]block.Group{g}), opts)
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

// openSet opens a set on dir and closes it when the test ends (failing the
// test, not hanging, if a reference is left: a failed test may leave one).
func openSet(t *testing.T, dir string, opts Options) *Set {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-async(s.Close):
		case <-time.After(10 * time.Second):
			t.Error("Close still waiting after 10s: a block reference was left")
		}
	})
	return s
}

// ulids returns the ULIDs of metas, in order.
func ulids(ms []block.Meta) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ULID
	}
	return out
}

func wantULIDs(t *testing.T, s *Set, want ...string) {
	t.Helper()
	if got := ulids(s.Metas()); !slices.Equal(got, want) {
		t.Fatalf("blocks %v, want %v", got, want)
	}
}

func acquiredULIDs(bs []*Block) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Meta().ULID
	}
	return out
}

// async runs f on a goroutine; its result arrives on the channel.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// pending fails the test if ch delivers within a grace period: what sends
// on it is still waiting.
func pending(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned (%v) while it should still wait", what, err)
	case <-time.After(100 * time.Millisecond):
	}
}

// result waits for what ch delivers, failing the test after 10 s.
func result(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still waiting after 10s", what)
		return nil
	}
}

// eventually polls cond until it holds, failing the test after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func exists(t *testing.T, p string) bool {
	t.Helper()
	_, err := os.Stat(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

// noDebris fails the test if a block directory of dir is left renamed for
// deletion.
func noDebris(t *testing.T, dir string) {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+deletingSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) > 0 {
		t.Fatalf("left behind: %v", m)
	}
}

// traversableDir returns a new temporary directory that user nobody may
// read (t.TempDir's parents are private), removed when the test ends.
func traversableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tandem-blockset")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

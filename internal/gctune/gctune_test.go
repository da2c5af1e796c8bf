package gctune

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		base              int
		live, minHeadroom uint64
		want              int
	}{
		{50, 16 * mib, 32 * mib, 200},      // small heap: the floor
		{50, 64 * mib, 32 * mib, 50},       // 50% of 64 MiB is the floor exactly
		{50, 1024 * mib, 32 * mib, 50},     // large heap: the base
		{50, 48 * mib, 32 * mib, 67},       // rounded up
		{50, 1, 32 * mib, maxPercent},      // bounded
		{50, 0, 32 * mib, 50},              // nothing measured yet
		{50, 16 * mib, 0, 50},              // tuning off
		{20000, 16 * mib, 32 * mib, 20000}, // a base above the bound stays
	} {
		if got := Percent(c.base, c.live, c.minHeadroom); got != c.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", c.base, c.live, c.minHeadroom, got, c.want)
		}
	}
}

// TestTunerFollowsCollections checks that the tuner runs after collections
// and sets the runtime's percentage from the live heap: with a floor far
// above this test's heap it must raise the percentage above the base, and
// Stop must restore the base.
func TestTunerFollowsCollections(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	tu := Start(50, 1<<30)
	defer tu.Stop()
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		tu.mu.Lock()
		tunes := tu.tunes
		tu.mu.Unlock()
		if tunes >= 3 || time.Now().After(deadline) {
			if tunes < 3 {
				t.Fatalf("tuned %d times after 3 collections, want at least 3 (start and 2 finalizers)", tunes)
			}
			break
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := tu.Current(); got <= 50 {
		t.Fatalf("percentage %d with a 1 GiB floor over a small heap, want above the base 50", got)
	}
	if got := debug.SetGCPercent(-1); got != tu.Current() {
		t.Errorf("runtime percentage %d, tuner says %d", got, tu.Current())
	}
	debug.SetGCPercent(tu.Current())
	tu.Stop()
	if got := debug.SetGCPercent(100); got != 50 {
		t.Errorf("after Stop the runtime percentage is %d, want the base 50", got)
	}
	// Stopped: collections no longer change it.
	runtime.GC()
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after Stop a collection set the percentage to %d", got)
	}
}

func TestStartOff(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	tu := Start(50, 0)
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if got := debug.SetGCPercent(100); got != 50 {
		t.Errorf("percentage %d with tuning off, want the base 50", got)
	}
	tu.Stop()
}

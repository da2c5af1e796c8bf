package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

var (
	crashTrials = flag.Int("crash.trials", 3, "TestCrashCampaign: trials to run (make soak runs 100)")
	crashSeed   = flag.Uint64("crash.seed", 0, "TestCrashCampaign: seed of the kill times and admin operations (0: from the clock; logged)")
	crashLogs   = flag.String("crash.logs", "", "TestCrashCampaign: directory to write every tandem process's log to")
)

// The campaign's tandem: 2 s blocks (compaction ranges 2, 6, 18, 54 s) and
// maintenance every 10 ms (a flush, compaction and retention pass every
// 40 ms), 15 s retention, a small WAL segment, so that a kill at a random
// moment lands in a flush, a WAL checkpoint, a compaction, retention, a
// tombstone cleaning or a snapshot. Samples are 5 ms apart from an hour ago:
// the senders write ~10-20 s of data per second.
const crashRetention = 15 * time.Second

func crashCampaignArgs(walSync string) []string {
	return []string{"--storage.wal.sync-interval=" + walSync, "--storage.block-range=2s", "--head.maintenance-interval=10ms",
		"--storage.retention.time=" + crashRetention.String(), "--storage.wal.segment-size=262144",
		"--web.enable-admin-api", "--log.level=info"}
}

// crashOp is an admin operation of a trial: acked once it answered 2xx,
// failed on another answer; neither when the kill cut it off.
type crashOp struct {
	kind           string // delete, clean, snapshot
	sender, series int    // delete: the series
	mint, maxt     int64  // delete: the range, both inclusive
	skipHead       bool   // snapshot
	name           string // snapshot: its directory under snapshots/
	acked, failed  bool
}

type crashTrial struct {
	t   *testing.T
	l   *crashLedger
	dir string

	mu    sync.Mutex
	ops   []*crashOp
	cycle int // ops[cycle:] are those since the last restart

	kills []string // per kill: what it cut off
}

// TestCrashCampaign kills tandem (kill -9) at seeded random moments while
// two senders write and an admin client deletes series, cleans tombstones and
// takes snapshots, with maintenance running all the time; after each restart
// it checks that start-up succeeded, nothing went to quarantine, every
// acknowledged sample is there exactly once with its value (except those an
// acknowledged delete covers, which must be gone, and those retention may
// have dropped), unacknowledged requests are all or nothing, nothing else is
// there, and every acknowledged snapshot is readable. Each trial is two kills
// on a fresh data directory; -crash.trials sets how many (make soak: 100).
func TestCrashCampaign(t *testing.T) {
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("crash campaign seed %d (rerun: -crash.seed=%d)", seed, seed)
	passed := 0
	counts := map[string]int{}
	for i := range *crashTrials {
		var kills []string
		ok := t.Run(fmt.Sprintf("trial%03d", i), func(t *testing.T) {
			tr := runCrashTrial(t, seed, i)
			kills = tr.kills
		})
		if ok {
			passed++
		}
		for _, k := range kills {
			for _, w := range strings.Split(k, ",") {
				counts[w]++
			}
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var cov []string
	for _, k := range keys {
		cov = append(cov, fmt.Sprintf("%s %d", k, counts[k]))
	}
	t.Logf("kills landed in: %s", strings.Join(cov, ", "))
	t.Logf("crash campaign: %d/%d trials passed (seed %d)", passed, *crashTrials, seed)
}

func runCrashTrial(t *testing.T, seed uint64, trial int) *crashTrial {
	rnd := rand.New(rand.NewPCG(seed, uint64(trial)))
	walSync := []string{"0s", "1s"}[rnd.IntN(2)]
	args := crashCampaignArgs(walSync)
	dir := t.TempDir()
	tr := &crashTrial{t: t, dir: dir, l: &crashLedger{base: time.Now().Add(-time.Hour).UnixMilli(), step: 5, senders: 2}}
	for s := range tr.l.senders {
		tr.l.tried[s] = map[int]bool{}
	}
	deadline := time.Now().Add(60 * time.Second) // the whole trial
	p := startTandem(t, dir, args...)
	for kill := range 2 {
		// The first kill after 0.3-2.5 s of load, the second 0-1.5 s after
		// the restart (in the recovery's first maintenance passes, too).
		delay := time.Duration(300+rnd.IntN(2200)) * time.Millisecond
		if kill > 0 {
			delay = time.Duration(rnd.IntN(1500)) * time.Millisecond
		}
		tr.mu.Lock()
		tr.cycle = len(tr.ops) // ops before were cut off by an earlier kill or done
		tr.mu.Unlock()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func(p *tandemProc) { defer wg.Done(); tr.l.run(t, p, stop) }(p)
		go func(p *tandemProc, rnd *rand.Rand) { defer wg.Done(); tr.admin(p, rnd, stop) }(p, rand.New(rand.NewPCG(rnd.Uint64(), 1)))
		tr.l.mu.Lock()
		acks0 := tr.l.acks
		tr.l.mu.Unlock()
		start := time.Now()
		for {
			tr.l.mu.Lock()
			n := tr.l.acks - acks0
			tr.l.mu.Unlock()
			if time.Since(start) >= delay && n >= 20 {
				break
			}
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				p.signal(syscall.SIGKILL) // its log is complete (and no longer written) once it exited
				t.Fatalf("kill %d: only %d requests acknowledged in %v\n%s", kill+1, n, time.Since(start), tail(p.log.String(), 40))
			}
			time.Sleep(time.Millisecond)
		}
		p.signal(syscall.SIGKILL)
		close(stop)
		wg.Wait()
		saveLog(t, p, fmt.Sprintf("trial%03d-kill%d.log", trial, kill+1))
		what := tr.cutOff(p.log.String())
		p = startTandem(t, dir, args...)
		tr.kills = append(tr.kills, what)
		tr.checkQuarantine()
		acked, samples := tr.verify(p)
		t.Logf("kill %d after %v (WAL sync %s) cut off %s; verified %d acknowledged requests, %d samples",
			kill+1, delay, walSync, what, acked, samples)
		if t.Failed() {
			p.signal(syscall.SIGKILL)
			t.Logf("log of the restarted tandem:\n%s", tail(p.log.String(), 40))
			return tr
		}
	}
	p.signal(syscall.SIGTERM)
	saveLog(t, p, fmt.Sprintf("trial%03d-last.log", trial))
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("tandem exited with %d after SIGTERM\n%s", code, tail(p.log.String(), 40))
	}
	tr.checkSnapshots()
	tr.checkBlockDuplicates()
	return tr
}

// saveLog writes p's log into the -crash.logs directory, if set.
func saveLog(t *testing.T, p *tandemProc, name string) {
	if *crashLogs == "" {
		return
	}
	if err := os.MkdirAll(*crashLogs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*crashLogs, name), p.log.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// admin deletes series ranges, cleans tombstones and takes snapshots at
// random until stop is closed.
func (tr *crashTrial) admin(p *tandemProc, rnd *rand.Rand, stop <-chan struct{}) {
	client := &http.Client{Timeout: 20 * time.Second}
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(20+rnd.IntN(100)) * time.Millisecond):
		}
		op := &crashOp{}
		var path string
		form := url.Values{}
		switch rnd.IntN(3) {
		case 0:
			// A range of one series well behind every request in flight.
			l := tr.l
			l.mu.Lock()
			low := l.nextReq[0]
			for s := range l.senders {
				low = min(low, l.nextReq[s])
			}
			l.mu.Unlock()
			hi := l.base + int64((low-8)*crashSamplesPer)*l.step
			if hi <= l.base {
				continue
			}
			op.kind, op.sender, op.series = "delete", rnd.IntN(l.senders), rnd.IntN(crashSeriesPerReq)
			op.maxt = l.base + rnd.Int64N(hi-l.base)
			op.mint = max(l.base, op.maxt-rnd.Int64N(2000))
			path = "/api/v1/admin/tsdb/delete_series"
			form.Set("match[]", fmt.Sprintf(`{__name__="crash_test",instance="sender-%d",series="%d"}`, op.sender, op.series))
			form.Set("start", fmtTime(op.mint))
			form.Set("end", fmtTime(op.maxt))
		case 1:
			op.kind, path = "clean", "/api/v1/admin/tsdb/clean_tombstones"
		case 2:
			op.kind, path, op.skipHead = "snapshot", "/api/v1/admin/tsdb/snapshot", rnd.IntN(2) == 0
			form.Set("skip_head", fmt.Sprint(op.skipHead))
		}
		tr.mu.Lock()
		tr.ops = append(tr.ops, op)
		tr.mu.Unlock()
		resp, err := client.PostForm(p.url+path, form)
		if err != nil {
			continue // cut off by the kill: neither acked nor failed
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			continue
		}
		tr.mu.Lock()
		if resp.StatusCode/100 == 2 {
			op.acked = true
			if op.kind == "snapshot" {
				var r struct {
					Data struct {
						Name string `json:"name"`
					} `json:"data"`
				}
				if err := json.Unmarshal(body, &r); err != nil || r.Data.Name == "" {
					tr.t.Errorf("snapshot answer %s: %v", body, err)
				}
				op.name = r.Data.Name
			}
		} else {
			op.failed = true
			tr.t.Logf("%s answered %d: %s", op.kind, resp.StatusCode, body)
		}
		tr.mu.Unlock()
	}
}

// cutOff names what the kill interrupted, from the data directory (files of
// an unfinished block, checkpoint or tombstones write) and the admin
// operations in flight.
func (tr *crashTrial) cutOff(log string) string {
	var what []string
	if m, _ := filepath.Glob(filepath.Join(tr.dir, "*.tmp-for-creation")); len(m) > 0 {
		what = append(what, "block-write")
	}
	if m, _ := filepath.Glob(filepath.Join(tr.dir, "wal", "checkpoint.*.tmp")); len(m) > 0 {
		what = append(what, "checkpoint")
	}
	if _, err := os.Stat(filepath.Join(tr.dir, "tombstones.json.tmp")); err == nil {
		what = append(what, "tombstones-write")
	}
	if tr.sourcesLeft() {
		what = append(what, "compaction-sources-left")
	}
	tr.mu.Lock()
	for _, op := range tr.ops[tr.cycle:] {
		if !op.acked && !op.failed && !slices.Contains(what, op.kind) {
			what = append(what, op.kind)
		}
	}
	tr.mu.Unlock()
	// The last maintenance step tandem logged before the kill.
	last := "start"
	for _, line := range strings.Split(log, "\n") {
		for _, m := range []struct{ msg, name string }{
			{"head range flushed to a block", "after-flush"},
			{"WAL checkpoint written", "after-checkpoint"},
			{"blocks compacted", "after-compaction"},
			{"block deleted", "after-block-delete"},
		} {
			if strings.Contains(line, m.msg) {
				last = m.name
			}
		}
	}
	if len(what) == 0 {
		what = append(what, "idle-"+last)
	}
	return strings.Join(what, ",")
}

// sourcesLeft reports whether a block of the data directory is among the
// sources of a compacted one (a kill between writing a merged block and
// deleting its sources).
func (tr *crashTrial) sourcesLeft() bool {
	dirs, err := blockDirs(tr.dir)
	if err != nil {
		tr.t.Fatal(err)
	}
	var metas []block.Meta
	for _, d := range dirs {
		var m block.Meta
		if b, err := os.ReadFile(filepath.Join(d, block.MetaFilename)); err == nil && json.Unmarshal(b, &m) == nil {
			metas = append(metas, m)
		}
	}
	for _, x := range metas {
		for _, y := range metas {
			if y.Compaction.Level > x.Compaction.Level && len(x.Compaction.Sources) > 0 &&
				!slices.ContainsFunc(x.Compaction.Sources, func(s string) bool { return !slices.Contains(y.Compaction.Sources, s) }) {
				return true
			}
		}
	}
	return false
}

func (tr *crashTrial) checkQuarantine() {
	entries, err := os.ReadDir(filepath.Join(tr.dir, "quarantine"))
	if err != nil && !os.IsNotExist(err) {
		tr.t.Fatal(err)
	}
	for _, e := range entries {
		tr.t.Errorf("after the restart, block %s is in quarantine", e.Name())
	}
}

// deleted returns whether an acknowledged delete covers the sample (gone)
// and whether one cut off by a kill or failed does (either state is right).
func (tr *crashTrial) deleted(sender, series int, ts int64) (gone, maybe bool) {
	for _, op := range tr.ops {
		if op.kind != "delete" || op.sender != sender || op.series != series || ts < op.mint || ts > op.maxt {
			continue
		}
		if op.acked {
			return true, false
		}
		maybe = true
	}
	return false, maybe
}

// verify reads every crash_test sample through the HTTP API and checks it
// against the ledger and the deletes; it returns the acknowledged requests
// and the samples checked.
func (tr *crashTrial) verify(p *tandemProc) (acked, total int) {
	t, l := tr.t, tr.l
	t.Helper()
	var d queryData
	p.api(t, "/api/v1/query", url.Values{"query": {"crash_test[2h]"}, "time": {fmtTime(time.Now().Add(5 * time.Minute).UnixMilli())}}, true, &d)
	got := map[string]map[int64]float64{}
	for _, s := range decodeResult(t, d) {
		m := map[int64]float64{}
		for i, ts := range s.T {
			if i > 0 && ts <= s.T[i-1] {
				t.Errorf("%s: sample at %d after %d (duplicate or out of order)", s.Labels, ts, s.T[i-1])
			}
			m[ts] = s.V[i]
		}
		if _, dup := got[s.Labels]; dup {
			t.Errorf("series %s returned twice", s.Labels)
		}
		got[s.Labels] = m
		total += len(s.T)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	// Retention drops blocks ending at or before the newest sample minus
	// the retention; the newest sample is at most the newest one sent.
	var newest int64
	for s := range l.senders {
		newest = max(newest, l.base+int64((l.nextReq[s]*crashSamplesPer)-1)*l.step)
	}
	cutoff := newest - crashRetention.Milliseconds()
	matched, errs := 0, 0
	report := func(format string, a ...any) {
		if errs++; errs <= 20 {
			t.Errorf(format, a...)
		}
	}
	for s := range l.senders {
		for i, ok := range l.tried[s] {
			present, checked := 0, 0
			for j := range crashSeriesPerReq {
				m := got[crashLabels(s, j).String()]
				for k := range crashSamplesPer {
					ts := l.base + int64(i*crashSamplesPer+k)*l.step
					v, found := m[ts]
					if found {
						matched++
						if w := crashValue(s, i, j, k); v != w {
							report("sender %d request %d series %d at %d: value %v, want %v", s, i, j, ts, v, w)
						}
					}
					gone, maybe := tr.deleted(s, j, ts)
					switch {
					case gone && found:
						report("sender %d series %d at %d: deleted (acknowledged delete) but still there", s, j, ts)
					case gone || maybe || ts <= cutoff:
						// deleted, or possibly deleted, or possibly dropped by retention
					case ok && !found:
						report("sender %d request %d series %d at %d: acknowledged but missing", s, i, j, ts)
					default:
						checked++
						if found {
							present++
						}
					}
				}
			}
			if ok {
				acked++
			} else if present != 0 && present != checked {
				report("sender %d request %d (not acknowledged) is half there: %d of %d samples", s, i, present, checked)
			}
		}
	}
	if matched != total {
		report("tandem holds %d crash_test samples, %d of them sent", total, matched)
	}
	if errs > 20 {
		t.Errorf("... %d errors in all", errs)
	}
	return acked, total
}

// checkSnapshots opens and verifies every block of every acknowledged snapshot.
func (tr *crashTrial) checkSnapshots() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, op := range tr.ops {
		if op.kind != "snapshot" || !op.acked {
			continue
		}
		dirs, err := blockDirs(filepath.Join(tr.dir, "snapshots", op.name))
		if err != nil {
			tr.t.Errorf("snapshot %s: %v", op.name, err)
			continue
		}
		for _, d := range dirs {
			b, err := block.Open(d)
			if err == nil {
				err = b.Verify()
				b.Close()
			}
			if err != nil {
				tr.t.Errorf("acknowledged snapshot %s (skip_head=%v): block %s: %v", op.name, op.skipHead, filepath.Base(d), err)
			}
		}
	}
}

// checkBlockDuplicates fails if a sample (series and timestamp) is in two
// blocks other than a block and its rewrite without deleted samples (same
// sources: a kill between writing the rewrite and deleting the original
// leaves both until a compaction merges them).
func (tr *crashTrial) checkBlockDuplicates() {
	t := tr.t
	dirs, err := blockDirs(tr.dir)
	if err != nil {
		t.Fatal(err)
	}
	type where struct {
		block   string
		sources string
	}
	seen := map[string]map[int64]where{}
	dups, legit := 0, 0
	for _, d := range dirs {
		b, err := block.Open(d)
		if err != nil {
			t.Errorf("block %s: %v", d, err)
			continue
		}
		m := b.Meta()
		here := where{m.ULID, strings.Join(m.Compaction.Sources, ",")}
		err = b.Groups()(func(g *block.Group) error {
			for _, tb := range g.Tables {
				for _, c := range tb.Columns {
					key := g.Members[c.Member].String()
					if seen[key] == nil {
						seen[key] = map[int64]where{}
					}
					for _, r := range c.Rows {
						ts := tb.Timestamps[r]
						prev, dup := seen[key][ts]
						switch {
						case !dup:
							seen[key][ts] = here
						case prev.sources == here.sources:
							legit++
						default:
							if dups++; dups <= 5 {
								t.Errorf("%s at %d is in blocks %s and %s", key, ts, prev.block, here.block)
							}
						}
					}
				}
			}
			return nil
		})
		b.Close()
		if err != nil {
			t.Errorf("block %s: %v", d, err)
		}
	}
	if dups > 0 {
		t.Errorf("%d samples are in two blocks", dups)
	}
	if legit > 0 {
		t.Logf("%d samples are in a block and in its rewrite (a kill cut off a tombstone cleaning)", legit)
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

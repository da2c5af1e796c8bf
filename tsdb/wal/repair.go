package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tandem-tsdb/tandem/internal/fsutil"
)

// maxPlaceholders bounds the empty segments Repair creates for missing ones.
const maxPlaceholders = 1 << 16

// SegmentReport is what Repair found in one segment (or one run of missing
// segments) of a WAL directory, and what it did about it.
type SegmentReport struct {
	Dir     string // the WAL directory, or its newest checkpoint
	Segment int    // segment number
	Last    int    // last segment of a run of missing segments; Segment otherwise
	Size    int64  // bytes before the repair
	Records int    // valid records, all kept
	Missing bool   // the segments did not exist: their records are lost
	Damage  []Damage
	// Action is what Repair did, or would do with DryRun; "" when the
	// segment was fine.
	Action string
}

// LostBytes returns the damaged bytes dropped.
func (r SegmentReport) LostBytes() int64 {
	var n int64
	for _, d := range r.Damage {
		n += d.Bytes
	}
	return n
}

// LostRecords returns the records known to be lost and whether that is exact
// (false: at least that many).
func (r SegmentReport) LostRecords() (n int, exact bool) {
	exact = !r.Missing
	for _, d := range r.Damage {
		n += d.lost()
		exact = exact && d.Records >= 0
	}
	return n, exact
}

// RepairOptions configures Repair.
type RepairOptions struct {
	DryRun bool // report only, change nothing
}

// Repair makes the WAL in dir readable by Replay again, keeping every valid
// record: each damaged segment is rewritten without its damaged bytes (the
// search for valid frames after damage is the one replay uses, with a larger
// work bound), a missing segment is replaced by an empty one so numbering
// stays contiguous, as are segments missing between the newest checkpoint.N
// and the first segment (the log starts at or below N). The newest
// checkpoint's own segments are repaired too. It returns a report per
// segment, in replay order (checkpoint first). The WAL must not be open.
func Repair(dir string, opts RepairOptions) ([]SegmentReport, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("wal: repair: %w", err)
	}
	var reps []SegmentReport
	cp, err := newestCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	if cp >= 0 {
		if reps, err = repairDir(filepath.Join(dir, fmt.Sprintf("%s%08d", checkpointPrefix, cp)), -1, opts); err != nil {
			return reps, err
		}
	}
	more, err := repairDir(dir, cp, opts)
	return append(reps, more...), err
}

// repairDir repairs the segments of one directory; the log must start at cp
// if cp >= 0, else at its first segment.
func repairDir(dir string, cp int, opts RepairOptions) ([]SegmentReport, error) {
	segs, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	if !opts.DryRun {
		if err := removeLeftovers(dir); err != nil {
			return nil, err
		}
	}
	first, last := cp, cp
	if len(segs) > 0 {
		first, last = segs[0], segs[len(segs)-1]
		if cp >= 0 {
			first, last = min(first, cp), max(last, cp)
		}
	}
	if first < 0 {
		return nil, nil
	}
	if last-first+1-len(segs) > maxPlaceholders {
		return nil, fmt.Errorf("wal: repair %s: more than %d segments missing between %d and %d", dir, maxPlaceholders, first, last)
	}
	var reps []SegmentReport
	r := newReplayer(readBufSize, repairBudget)
	have := map[int]bool{}
	for _, s := range segs {
		have[s] = true
	}
	created := false
	for n := first; n <= last; n++ {
		if !have[n] {
			if k := len(reps) - 1; k >= 0 && reps[k].Missing && reps[k].Last == n-1 {
				reps[k].Last = n
			} else {
				reps = append(reps, SegmentReport{Dir: dir, Segment: n, Last: n, Missing: true, Action: "created an empty placeholder"})
			}
			if opts.DryRun {
				reps[len(reps)-1].Action = "would create an empty placeholder"
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, segmentName(n)), nil, 0o666); err != nil {
				return reps, fmt.Errorf("wal: repair: create placeholder: %w", err)
			}
			created = true
			continue
		}
		rep, err := repairSegment(r, dir, n, opts)
		reps = append(reps, rep)
		if err != nil {
			return reps, err
		}
	}
	if created {
		if err := fsutil.SyncDir(dir); err != nil {
			return reps, fmt.Errorf("wal: %w", err)
		}
	}
	return reps, nil
}

func repairSegment(r *replayer, dir string, n int, opts RepairOptions) (SegmentReport, error) {
	rep := SegmentReport{Dir: dir, Segment: n, Last: n}
	f, err := os.Open(filepath.Join(dir, segmentName(n)))
	if err != nil {
		return rep, fmt.Errorf("wal: repair: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return rep, fmt.Errorf("wal: repair: %w", err)
	}
	rep.Size = fi.Size()
	rep.Damage, err = r.scan(f, rep.Size, false, func(int64, []byte) error { rep.Records++; return nil })
	if err != nil {
		return rep, fmt.Errorf("wal: repair segment %d of %s: %w", n, dir, err)
	}
	if len(rep.Damage) == 0 {
		return rep, nil
	}
	if opts.DryRun {
		rep.Action = "would be rewritten without the damaged bytes"
		return rep, nil
	}
	rep.Action = "rewritten without the damaged bytes"
	return rep, rewriteSegment(dir, n, f, rep.Size, rep.Damage)
}

// removeLeftovers deletes the temporary files of an interrupted recovery or rewrite.
func removeLeftovers(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("wal: list %s: %w", dir, err)
	}
	for _, e := range entries {
		if name := e.Name(); name == recoveryFile || (strings.HasSuffix(name, ".repair") && allDigits(strings.TrimSuffix(name, ".repair"))) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("wal: remove leftover: %w", err)
			}
		}
	}
	return nil
}

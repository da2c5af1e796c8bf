package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/oklog/ulid/v2"

	"github.com/tandem-tsdb/tandem/tsdb/block"
	"github.com/tandem-tsdb/tandem/tsdb/wal"
)

// runTSDB implements `tandem tsdb inspect|verify|repair`: offline tools over a data directory.
func runTSDB(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: tandem tsdb inspect|verify|repair [--storage.path=./data] [--groups] [--dry-run]")
	}
	cmd := args[0]
	fs := flag.NewFlagSet("tandem tsdb "+cmd, flag.ContinueOnError)
	path := fs.String("storage.path", "./data", "Data directory.")
	groups := fs.Bool("groups", false, "inspect: also list every group with its members and columns.")
	dryRun := fs.Bool("dry-run", false, "repair: report what would be repaired, change nothing (fails if the WAL needs a repair).")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if cmd == "repair" {
		return repairWAL(out, *path, *dryRun)
	}
	dirs, err := blockDirs(*path)
	if err != nil {
		return err
	}
	switch cmd {
	case "inspect":
		return inspect(out, dirs, *groups)
	case "verify":
		bad := 0
		for _, d := range dirs {
			b, err := block.Open(d)
			if err == nil {
				err = b.Verify()
				b.Close()
			}
			if err != nil {
				bad++
				fmt.Fprintf(out, "%s: CORRUPT: %v\n", d, err)
				continue
			}
			fmt.Fprintf(out, "%s: ok\n", d)
		}
		if bad > 0 {
			return fmt.Errorf("%d of %d blocks are corrupt", bad, len(dirs))
		}
		return nil
	}
	return fmt.Errorf("unknown tsdb command %q: use inspect, verify or repair", cmd)
}

func blockDirs(path string) ([]string, error) {
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("read data directory: %w", err)
	}
	var dirs []string
	for _, e := range entries {
		if _, err := ulid.ParseStrict(e.Name()); err == nil && e.IsDir() {
			dirs = append(dirs, filepath.Join(path, e.Name()))
		}
	}
	return dirs, nil
}

func inspect(out io.Writer, dirs []string, groups bool) error {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BLOCK\tMIN TIME\tMAX TIME\tLEVEL\tGROUPS\tSERIES\tSAMPLES\tCHUNKS\tBYTES\tBYTES/SAMPLE\tTS BYTES\tALIGNED SAMPLES\tEXEMPLARS")
	var totalBytes, totalSamples int
	encodings := map[string]int{}
	for _, d := range dirs {
		b, err := block.Open(d)
		if err != nil {
			fmt.Fprintf(tw, "%s\tunreadable: %v\n", filepath.Base(d), err)
			continue
		}
		m := b.Meta()
		ins, err := b.Inspect()
		if err != nil {
			b.Close()
			return fmt.Errorf("inspect %s: %w", d, err)
		}
		bytes, tsBytes, samples, aligned := 0, 0, 0, 0
		for _, g := range ins.Groups {
			for ti, t := range g.Tables {
				bytes += t.Bytes
				tsBytes += t.TimestampBytes
				for _, c := range t.Columns {
					samples += c.Samples
					if ti == 0 {
						aligned += c.Samples
					}
					for e, n := range c.Encodings {
						encodings[e] += n
					}
				}
			}
		}
		totalBytes += bytes
		totalSamples += samples
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.3f\t%d\t%.1f%%\t%d\n", m.ULID, m.MinTime, m.MaxTime, m.Compaction.Level,
			m.Stats.NumGroups, m.Stats.NumSeries, samples, m.Stats.NumChunks, bytes, perSample(bytes, samples), tsBytes, 100*perSample(aligned, samples),
			m.Stats.NumExemplars)
		if groups {
			for _, g := range ins.Groups {
				fmt.Fprintf(tw, "  group %s\t%d members\t%d tables\n", g.Key, len(g.Members), len(g.Tables))
				for ti, t := range g.Tables {
					kind := "shared"
					if ti > 0 {
						kind = "unaligned"
					}
					fmt.Fprintf(tw, "    table %d (%s)\t%d rows\t%d chunks\t%d bytes\t%d ts bytes\t%d regular\n", ti, kind, t.Rows, t.Chunks, t.Bytes, t.TimestampBytes, t.Regular)
					for _, c := range t.Columns {
						fmt.Fprintf(tw, "      %s\t%d samples\t%d bytes\t%.3f B/sample\t%s\t%s\n", g.Members[c.Member], c.Samples, c.Bytes,
							perSample(c.Bytes, c.Samples), counts(c.Encodings), counts(c.Presence))
					}
				}
			}
		}
		b.Close()
	}
	fmt.Fprintf(tw, "TOTAL\t\t\t\t\t\t%d\t\t%d\t%.3f\n", totalSamples, totalBytes, perSample(totalBytes, totalSamples))
	fmt.Fprintf(tw, "column chunks by encoding: %s\n", counts(encodings))
	return tw.Flush()
}

func perSample(bytes, samples int) float64 {
	if samples == 0 {
		return 0
	}
	return float64(bytes) / float64(samples)
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, ",")
}

// repairWAL implements `tandem tsdb repair`: it makes the WAL of a stopped
// tandem readable again (wal.Repair) and reports, per segment, what was lost.
func repairWAL(out io.Writer, path string, dryRun bool) error {
	dir := filepath.Join(path, "wal")
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("no WAL to repair: %w", err)
	}
	// The lock tandem holds on the data directory while it runs.
	lock, err := os.OpenFile(filepath.Join(path, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("open lock file: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("data directory %s is in use (stop tandem first): %w", path, err)
	}
	reps, err := wal.Repair(dir, wal.RepairOptions{DryRun: dryRun})
	changed, missing := 0, 0
	var lostBytes int64
	lostRecords, exact := 0, true
	for _, r := range reps {
		name := filepath.Join(r.Dir, fmt.Sprintf("%08d", r.Segment))
		switch {
		case r.Missing:
			missing += r.Last - r.Segment + 1
			exact = false
			if r.Last != r.Segment {
				name = fmt.Sprintf("%s to %08d", name, r.Last)
			}
			fmt.Fprintf(out, "%s: MISSING: its records are lost; %s\n", name, r.Action)
		case len(r.Damage) == 0:
			fmt.Fprintf(out, "%s: ok (%d records, %d bytes)\n", name, r.Records, r.Size)
		default:
			n, ex := r.LostRecords()
			lostBytes += r.LostBytes()
			lostRecords += n
			exact = exact && ex
			fmt.Fprintf(out, "%s: DAMAGED: %d bytes and %s dropped, %d records kept; %s\n", name, r.LostBytes(), recordCount(n, ex), r.Records, r.Action)
			for _, d := range r.Damage {
				where := "followed by valid records"
				if d.Tail {
					where = "to the end of the segment"
				}
				if d.Incomplete {
					where = "search for valid records gave up (work bound): the rest of the segment is dropped"
				}
				fmt.Fprintf(out, "    offset %d: %d bytes (%s), %s: %v\n", d.Offset, d.Bytes, recordCount(d.Records, d.Records >= 0), where, d.Err)
			}
		}
		if r.Action != "" {
			changed++
		}
	}
	if err != nil {
		return fmt.Errorf("repair %s: %w", dir, err)
	}
	if changed == 0 {
		fmt.Fprintln(out, "WAL is sound: nothing to repair")
		return nil
	}
	verb := "repaired"
	if dryRun {
		verb = "needs a repair (dry run: nothing changed)"
	}
	fmt.Fprintf(out, "WAL %s: %d segments changed, %d missing; %d damaged bytes and %s dropped\n",
		verb, changed, missing, lostBytes, recordCount(lostRecords, exact))
	if dryRun {
		return errors.New("the WAL needs a repair")
	}
	return nil
}

// recordCount renders a count of lost records: exact, or a lower bound.
func recordCount(n int, exact bool) string {
	s := "s"
	if n == 1 {
		s = ""
	}
	if !exact {
		return fmt.Sprintf("at least %d record%s", max(n, 1), s)
	}
	return fmt.Sprintf("%d record%s", n, s)
}

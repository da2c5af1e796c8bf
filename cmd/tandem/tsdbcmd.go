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
	"text/tabwriter"

	"github.com/oklog/ulid/v2"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// runTSDB implements `tandem tsdb inspect|verify`: offline tools over a data directory.
func runTSDB(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: tandem tsdb inspect|verify [--storage.path=./data] [--groups]")
	}
	cmd := args[0]
	fs := flag.NewFlagSet("tandem tsdb "+cmd, flag.ContinueOnError)
	path := fs.String("storage.path", "./data", "Data directory.")
	groups := fs.Bool("groups", false, "inspect: also list every group with its members and columns.")
	if err := fs.Parse(args[1:]); err != nil {
		return err
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
	return fmt.Errorf("unknown tsdb command %q: use inspect or verify", cmd)
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

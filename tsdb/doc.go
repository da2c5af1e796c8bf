// Package tsdb is tandem's storage: DB, the one storage.Storage of the
// program. It owns the multivariate head (package tsdb/head, with its WAL)
// and the blocks the head is flushed into (package tsdb/blockset holds the
// open ones), and it is the only code that moves data between them:
//
//   - Flush writes the head's full block ranges as blocks (head.ExportRange)
//     and its late data as out-of-order blocks (head.ExportLate), hands them
//     to the block set, then lets the head drop what they hold;
//   - Compact merges blocks (package compact), ApplyRetention deletes old
//     ones, CleanTombstones rewrites blocks without deleted samples;
//   - Run schedules all of it; Snapshot copies blocks and head.
//
// Queriers merge the head's querier with one per block and hide deleted
// samples (tombstones); their series implement fastread.FloatAppender.
package tsdb

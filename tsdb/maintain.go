package tsdb

import (
	"context"
	"time"
)

// Defaults of the maintenance schedule (DBOptions.SealInterval, FlushInterval).
const (
	DefaultSealInterval  = 15 * time.Second
	DefaultFlushInterval = time.Minute
)

// Run maintains the storage until ctx is done: every SealInterval it seals
// the open rows of idle groups, realigns the samples lagging members
// stored on their own (head.Realign) and settles the head's index
// (head.SettleIndex); at the first of those ticks and then every
// FlushInterval it flushes full head ranges to blocks, compacts blocks and
// applies retention. A failed step is logged and retried at its next turn
// (nothing is lost: the head keeps what it could not flush).
func (db *DB) Run(ctx context.Context) {
	seal, flush := db.opts.SealInterval, db.opts.FlushInterval
	if seal <= 0 {
		seal = DefaultSealInterval
	}
	if flush <= 0 {
		flush = DefaultFlushInterval
	}
	t := time.NewTicker(seal)
	defer t.Stop()
	var nextFlush time.Time // the first tick flushes
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			db.head.SealIdle()
			db.head.Realign()
			db.head.SettleIndex()
			if now.Before(nextFlush) {
				continue
			}
			nextFlush = now.Add(flush)
			db.maintain()
		}
	}
}

// maintain runs one flush, compaction and retention pass.
func (db *DB) maintain() {
	if err := db.Flush(false); err != nil {
		db.logger.Error("flushing the head to a block failed; will retry", "err", err)
	}
	if err := db.Compact(); err != nil {
		db.logger.Error("compaction failed; will retry", "err", err)
	}
	if err := db.ApplyRetention(); err != nil {
		db.logger.Error("retention failed; will retry", "err", err)
	}
}

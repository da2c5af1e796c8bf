package tsdb

import "github.com/tandem-tsdb/tandem/tsdb/internal/tsdbtest"

// Shared with the head's tests (package tsdbtest).
type model = tsdbtest.Model

var (
	readSeries    = tsdbtest.ReadSeries
	compareModels = tsdbtest.CompareModels
	series        = tsdbtest.Series
)

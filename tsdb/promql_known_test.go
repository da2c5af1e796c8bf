package tsdb

// Sections (file:first line) of the PromQL acceptance suite that need
// sample start timestamps, which the head does not store yet.
var knownSTSections = []string{
	"start_timestamps.test:427",
	"start_timestamps.test:452",
	"start_timestamps.test:484",
	"start_timestamps.test:528",
	"start_timestamps.test:1",
	"start_timestamps.test:105",
	"start_timestamps.test:168",
	"start_timestamps.test:178",
	"start_timestamps.test:201",
	"start_timestamps.test:405",
	"start_timestamps.test:494",
	"start_timestamps.test:53",
}

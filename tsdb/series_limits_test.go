package tsdb

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// TestDBSeriesLimits: the DB passes limits to its head, and the
// storage.Appender (rule evaluation) is refused new series beyond them with
// the limit named, while existing series keep being written.
func TestDBSeriesLimits(t *testing.T) {
	db := openDB(t, t.TempDir(), nil)
	defer db.Close()
	lim := head.SeriesLimits{MaxSeries: 2}
	db.SetSeriesLimits(lim)
	a := labels.FromStrings("__name__", "rule:a", "job", "j")
	b := labels.FromStrings("__name__", "rule:b", "job", "j")
	c := labels.FromStrings("__name__", "rule:c", "job", "j")
	app := db.Appender(context.Background())
	for _, l := range []labels.Labels{a, b} {
		if _, err := app.Append(0, l, 1000, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	app = db.Appender(context.Background())
	for _, l := range []labels.Labels{a, b, c} {
		if _, err := app.Append(0, l, 2000, 2); err != nil {
			t.Fatal(err)
		}
	}
	err := app.Commit()
	if !errors.Is(err, head.ErrSeriesLimit) || !strings.Contains(err.Error(), "max_series (2)") {
		t.Fatalf("Commit beyond the limit: %v", err)
	}
	if u := db.LimitUsage(); u.Series != 2 || u.Limits != lim {
		t.Fatalf("usage: %+v", u)
	}
	got := dbAll(t, db)
	if len(got) != 2 || len(got[a.String()]) != 2 || len(got[b.String()]) != 2 {
		t.Fatalf("stored %v", got)
	}
}

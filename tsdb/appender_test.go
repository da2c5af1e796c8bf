package tsdb

import (
	"context"
	"testing"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
)

// TestAppenderExemplars: exemplars given to the DB's storage.Appender and
// AppenderV2 are written with their batch and come back from the exemplar
// querier.
func TestAppenderExemplars(t *testing.T) {
	db := openDB(t, t.TempDir(), exemplarOpts)
	defer db.Close()
	l1 := series("m_bucket", "job", "j", "le", "1")
	l2 := series("m_bucket", "job", "j", "le", "2")
	app := db.Appender(context.Background())
	ref, err := app.Append(0, l1, 1000, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.AppendExemplar(ref, l1, exemplar.Exemplar{Labels: labels.FromStrings("trace_id", "a"), Value: 0.5, Ts: 1000, HasTs: true}); err != nil {
		t.Fatal(err)
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	v2 := db.AppenderV2(context.Background())
	if _, err := v2.Append(0, l2, 0, 2000, 2, nil, nil, storage.AppendV2Options{
		Exemplars: []exemplar.Exemplar{{Labels: labels.FromStrings("trace_id", "b"), Value: 1.5, Ts: 2000, HasTs: true}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := v2.Commit(); err != nil {
		t.Fatal(err)
	}
	eq, err := db.ExemplarQuerier(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := eq.Select(0, 3000, []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "job", "j")})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range res {
		for _, e := range r.Exemplars {
			got[r.SeriesLabels.Get("le")] = e.Labels.Get("trace_id")
		}
	}
	if len(got) != 2 || got["1"] != "a" || got["2"] != "b" {
		t.Fatalf("exemplars %v, want le=1: a, le=2: b (results %v)", got, res)
	}
}

package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/util/teststorage"
)

// BenchmarkInstantQueryRoundTrip measures the fixed cost of one small
// instant query (one series' max_over_time over 3 h): evaluated by the
// engine in process ("engine"), and over HTTP through the API on loopback
// with a keep-alive client ("http"); the difference is what the HTTP
// server, the API and the client add to every dashboard panel.
func BenchmarkInstantQueryRoundTrip(b *testing.B) {
	st := teststorage.New(b)
	app := st.Appender(context.Background())
	start := time.Unix(1_700_000_000, 0)
	ls := labels.FromStrings("__name__", "node_load1", "instance", "host-0:9100", "job", "node")
	for i := range 720 {
		if _, err := app.Append(0, ls, start.Add(time.Duration(i)*15*time.Second).UnixMilli(), float64(i%17)); err != nil {
			b.Fatal(err)
		}
	}
	if err := app.Commit(); err != nil {
		b.Fatal(err)
	}
	opts := Options{Queryable: st, Registerer: prometheus.NewRegistry(), Version: "0.1.0"}
	eng := newEngine(opts)
	h, err := NewHandler(opts, eng)
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/v1/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	q := `max_over_time(node_load1{instance="host-0:9100"}[3h])`
	at := start.Add(3 * time.Hour)
	b.Run("engine", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			qry, err := eng.NewInstantQuery(context.Background(), st, nil, q, at)
			if err != nil {
				b.Fatal(err)
			}
			if res := qry.Exec(context.Background()); res.Err != nil {
				b.Fatal(res.Err)
			}
			qry.Close()
		}
	})
	b.Run("http", func(b *testing.B) {
		u := srv.URL + "/api/v1/query?" + url.Values{"query": {q}, "time": {strconv.FormatInt(at.Unix(), 10)}}.Encode()
		client := srv.Client()
		b.ReportAllocs()
		for b.Loop() {
			resp, err := client.Get(u)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatal(resp.Status)
			}
		}
	})
}

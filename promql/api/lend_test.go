package api

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	v1 "github.com/prometheus/prometheus/web/api/v1"
)

// resetLending empties the lending state the package's tests share.
func resetLending(t *testing.T) {
	t.Helper()
	lending.mu.Lock()
	lending.out, lending.idle = nil, nil
	lending.mu.Unlock()
}

// respondLike answers as Prometheus's respond does: the codec's bytes, in
// one Write. encoded receives each slice the codec returned.
func respondLike(resp *v1.Response, encoded *[][]byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b, err := jsonCodec{}.Encode(resp)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		*encoded = append(*encoded, b)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b)
	})
}

// largeAnswers are a matrix, a vector and a series list, each of ~1 MB of JSON.
func largeAnswers() map[string]*v1.Response {
	vec := make(promql.Vector, 8000)
	series := make([]labels.Labels, 8000)
	for i := range vec {
		ls := labels.FromStrings("__name__", "node_load1", "instance", fmt.Sprintf("host-%d:9100", i), "job", "node")
		vec[i] = promql.Sample{Metric: ls, T: 1796344934000, F: float64(i) / 7}
		series[i] = ls
	}
	return map[string]*v1.Response{
		"matrix": benchMatrix(200, 181, true),
		"vector": {Status: "success", Data: &v1.QueryData{ResultType: vec.Type(), Result: vec}},
		"series": {Status: "success", Data: series},
	}
}

// TestLargeAnswerBufferLent: a large answer's JSON buffer comes back from
// the response writer, compressed or not, and the next large answer is
// encoded into it; the bytes stay Prometheus's.
func TestLargeAnswerBufferLent(t *testing.T) {
	resetLending(t)
	defer resetLending(t)
	for name, resp := range largeAnswers() {
		if !largeAnswer(resp) {
			t.Fatalf("%s: not seen as large", name)
		}
		want, err := v1.JSONCodec{}.Encode(resp)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) < lendMin {
			t.Fatalf("%s: answer of %d bytes: not large", name, len(want))
		}
		var encoded [][]byte
		h := compressResponses(respondLike(resp, &encoded))
		for i, gz := range []bool{true, true, false, false, true} {
			req := httptest.NewRequest(http.MethodGet, "/api/v1/query_range", nil)
			if gz {
				req.Header.Set("Accept-Encoding", "gzip")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			body := rec.Body.Bytes()
			if gz {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(body, want) {
				t.Fatalf("%s: answer %d (gzip %v): %d bytes differ from Prometheus's %d", name, i, gz, len(body), len(want))
			}
			if i > 0 && &encoded[i][0] != &encoded[0][0] {
				t.Fatalf("%s: answer %d (gzip %v) was encoded into a new buffer, not the one handed back", name, i, gz)
			}
		}
		lending.mu.Lock()
		out, idle := len(lending.out), len(lending.idle)
		lending.mu.Unlock()
		if out != 0 || idle != 1 {
			t.Fatalf("%s: after the answers %d buffers out, %d idle; want 0 and 1", name, out, idle)
		}
	}
}

// TestLendingBounded: answers whose buffers are never handed back (written
// by another path) stop the lending at maxLent; later answers are still
// right, and a small answer keeps being copied out.
func TestLendingBounded(t *testing.T) {
	resetLending(t)
	defer resetLending(t)
	resp := benchMatrix(200, 181, true)
	want, err := v1.JSONCodec{}.Encode(resp)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[*byte]bool{}
	for i := range maxLent + 3 {
		b, err := jsonCodec{}.Encode(resp)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, want) {
			t.Fatalf("answer %d differs from Prometheus's", i)
		}
		if seen[&b[0]] {
			t.Fatalf("answer %d shares a buffer still held by an earlier one", i)
		}
		seen[&b[0]] = true
	}
	lending.mu.Lock()
	out := len(lending.out)
	lending.mu.Unlock()
	if out != maxLent {
		t.Fatalf("%d buffers out, want the bound %d", out, maxLent)
	}
	small := benchMatrix(2, 10, false)
	wantSmall, _ := v1.JSONCodec{}.Encode(small)
	if got, err := (jsonCodec{}).Encode(small); err != nil || !bytes.Equal(got, wantSmall) {
		t.Fatalf("small answer: %v, equal %v", err, bytes.Equal(got, wantSmall))
	}
}

package api

import (
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
)

// compressResponses compresses the API's responses as Prometheus's
// httputil.CompressionHandler does (gzip or deflate, the first of them the
// client accepts), with writers reused from pools and at the fastest level:
// upstream allocates a whole compressor per response and compresses at the
// default level, which cost as much CPU as a large range query's evaluation.
// The handler below sees no Accept-Encoding, so it writes plain bytes.
// Remote read answers (snappy already) pass through untouched.
func compressResponses(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		enc := acceptedEncoding(r.Header.Get("Accept-Encoding"))
		if enc == "" || r.URL.Path == apiPrefix+"/read" {
			h.ServeHTTP(w, r)
			return
		}
		inner := new(http.Request)
		*inner = *r
		inner.Header = r.Header.Clone()
		inner.Header.Del("Accept-Encoding")
		w.Header().Set("Content-Encoding", enc)
		cw := &compressedWriter{ResponseWriter: w}
		if enc == "gzip" {
			gz := gzipPool.Get().(*gzip.Writer)
			gz.Reset(w)
			cw.w = gz
			defer func() { gz.Reset(io.Discard); gzipPool.Put(gz) }()
		} else {
			zw := zlibPool.Get().(*zlib.Writer)
			zw.Reset(w)
			cw.w = zw
			defer func() { zw.Reset(io.Discard); zlibPool.Put(zw) }()
		}
		h.ServeHTTP(cw, inner)
		cw.Header().Del("Content-Length")
		_ = cw.w.Close()
	})
}

// acceptedEncoding returns "gzip" or "deflate", whichever comes first in an
// Accept-Encoding header, or "" (upstream's choice, q-values ignored).
func acceptedEncoding(header string) string {
	for header != "" {
		var enc string
		enc, header, _ = strings.Cut(header, ",")
		switch enc = strings.TrimSpace(enc); enc {
		case "gzip", "deflate":
			return enc
		}
	}
	return ""
}

var (
	gzipPool = sync.Pool{New: func() any {
		w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
		return w
	}}
	zlibPool = sync.Pool{New: func() any {
		w, _ := zlib.NewWriterLevel(nil, zlib.BestSpeed)
		return w
	}}
)

// compressedWriter sends a response's body through a compressor.
type compressedWriter struct {
	http.ResponseWriter
	w io.WriteCloser
}

func (c *compressedWriter) WriteHeader(status int) {
	c.Header().Del("Content-Length")
	c.ResponseWriter.WriteHeader(status)
}

func (c *compressedWriter) Write(p []byte) (int, error) {
	c.Header().Del("Content-Length")
	return c.w.Write(p)
}

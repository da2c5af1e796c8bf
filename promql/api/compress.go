package api

import (
	"io"
	"net/http"
	"runtime"
	"strings"

	"github.com/klauspost/compress/zlib"
)

// compressResponses compresses the API's responses as Prometheus's
// httputil.CompressionHandler does (gzip or deflate, the first of them the
// client accepts), with writers reused from free lists and at the fastest level (gzip
// through gzipStream, which compresses a large body on several cores):
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
			gz := gzipStreamFree.get()
			gz.reset(w)
			cw.w = gz
			defer func() { gz.reset(io.Discard); gzipStreamFree.put(gz) }()
		} else {
			zw := zlibFree.get()
			zw.Reset(w)
			cw.w = zw
			defer func() { zw.Reset(io.Discard); zlibFree.put(zw) }()
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

// freeList keeps up to its capacity of idle writers. Unlike a sync.Pool it
// is not emptied by garbage collections: a server answering small queries
// collects every few requests (the head's heap is small and GOGC 50), and a
// compressor is some hundred kilobytes to build and clear again.
type freeList[W any] struct {
	idle  chan W
	build func() W
}

func newFreeList[W any](build func() W) *freeList[W] {
	return &freeList[W]{idle: make(chan W, min(max(runtime.GOMAXPROCS(0), 2), 8)), build: build}
}

func (f *freeList[W]) get() W {
	select {
	case w := <-f.idle:
		return w
	default:
		return f.build()
	}
}

func (f *freeList[W]) put(w W) {
	select {
	case f.idle <- w:
	default: // full: w is garbage
	}
}

var (
	zlibFree = newFreeList(func() *zlib.Writer {
		w, _ := zlib.NewWriterLevel(nil, zlib.BestSpeed)
		return w
	})
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

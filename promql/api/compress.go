package api

import (
	"cmp"
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
// A body under minCompressSize is sent as it is, as klauspost's gzhttp and
// web servers do by default: compressing an instant query's answer took
// longer on both ends than sending it.
// The handler below sees no Accept-Encoding, so it writes plain bytes.
// Both writers hand a large answer's lent JSON buffer back (lend.go).
// Remote read answers (snappy already) pass through untouched.
func compressResponses(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == apiPrefix+"/read" {
			h.ServeHTTP(w, r) // streamed remote read flushes the connection's writer
			return
		}
		enc := acceptedEncoding(r.Header.Get("Accept-Encoding"))
		if enc == "" {
			h.ServeHTTP(givingBack{w}, r)
			return
		}
		inner := new(http.Request)
		*inner = *r
		inner.Header = r.Header.Clone()
		inner.Header.Del("Accept-Encoding")
		cw := &compressedWriter{ResponseWriter: w, enc: enc}
		defer cw.release()
		h.ServeHTTP(cw, inner)
		cw.finish()
	})
}

// minCompressSize is the smallest body compressed (gzhttp's default).
const minCompressSize = 1024

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

// compressedWriter holds a response's status and first bytes until the
// body reaches minCompressSize, then sends it through a compressor; a
// smaller body is sent as it is when the handler returns.
type compressedWriter struct {
	http.ResponseWriter
	enc    string // gzip or deflate
	status int    // held until the body's size decides; 0: none set
	sent   bool   // the status and headers are sent
	held   []byte // the body while it is under minCompressSize
	gz     *gzipStream
	zw     *zlib.Writer
	w      io.WriteCloser // the compressor, once compressing
}

func (c *compressedWriter) WriteHeader(status int) {
	if c.status == 0 && !c.sent {
		c.status = status
	}
}

func (c *compressedWriter) Write(p []byte) (int, error) {
	defer giveBack(p) // written (or held as a copy) when this returns
	switch {
	case c.w != nil:
		return c.w.Write(p)
	case c.sent:
		return c.ResponseWriter.Write(p)
	case len(c.held)+len(p) < minCompressSize:
		c.held = append(c.held, p...)
		return len(p), nil
	}
	c.compress()
	if len(c.held) > 0 {
		if _, err := c.w.Write(c.held); err != nil {
			return 0, err
		}
		c.held = nil
	}
	return c.w.Write(p)
}

// compress sends the headers of a compressed body and starts its compressor.
func (c *compressedWriter) compress() {
	h := c.Header()
	h.Set("Content-Encoding", c.enc)
	h.Del("Content-Length")
	c.send()
	if c.enc == "gzip" {
		c.gz = gzipStreamFree.get()
		c.gz.reset(c.ResponseWriter)
		c.w = c.gz
		return
	}
	c.zw = zlibFree.get()
	c.zw.Reset(c.ResponseWriter)
	c.w = c.zw
}

// send sends the status held (200 if none) and the headers.
func (c *compressedWriter) send() {
	c.sent = true
	c.ResponseWriter.WriteHeader(cmp.Or(c.status, http.StatusOK))
}

// finish ends the body once the handler returned: the compressor's last
// bytes, or the small body held, as it is.
func (c *compressedWriter) finish() {
	if c.w != nil {
		_ = c.w.Close()
		return
	}
	if c.sent {
		return
	}
	c.send() // (net/http sets the Content-Length of a body this small)
	if len(c.held) > 0 {
		_, _ = c.ResponseWriter.Write(c.held)
	}
}

// release gives the compressor back to its free list.
func (c *compressedWriter) release() {
	if c.gz != nil {
		c.gz.reset(io.Discard)
		gzipStreamFree.put(c.gz)
	}
	if c.zw != nil {
		c.zw.Reset(io.Discard)
		zlibFree.put(c.zw)
	}
}

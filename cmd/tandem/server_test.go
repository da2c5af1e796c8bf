package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHTTPServerTimeouts: a sender that stalls in the headers or the body,
// or leaves its connection idle, is cut off after its timeout instead of
// holding a connection (and a remote-write request slot) forever.
func TestHTTPServerTimeouts(t *testing.T) {
	bodyErr := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		if err != nil {
			bodyErr <- err
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	srv := newHTTPServer(h, serverTimeouts{readHeader: 200 * time.Millisecond, read: 400 * time.Millisecond, idle: 300 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		return conn
	}
	// closedWithin reports whether the server closes conn within d (reading past any response).
	closedWithin := func(conn net.Conn, d time.Duration) bool {
		_ = conn.SetReadDeadline(time.Now().Add(d))
		_, err := io.Copy(io.Discard, conn)
		var ne net.Error
		return !errors.As(err, &ne) || !ne.Timeout()
	}

	t.Run("headers", func(t *testing.T) {
		conn := dial()
		fmt.Fprint(conn, "POST /api/v1/write HTTP/1.1\r\nHost: tandem\r\n") // never ends the headers
		if !closedWithin(conn, 3*time.Second) {
			t.Error("connection with unfinished headers not closed")
		}
	})
	t.Run("body", func(t *testing.T) {
		conn := dial()
		fmt.Fprint(conn, "POST /api/v1/write HTTP/1.1\r\nHost: tandem\r\nContent-Length: 1000\r\n\r\n0123456789") // stalls
		select {
		case err := <-bodyErr:
			t.Logf("body read: %v", err)
		case <-time.After(3 * time.Second):
			t.Error("a stalled body was not cut off")
		}
	})
	t.Run("idle", func(t *testing.T) {
		conn := dial()
		fmt.Fprint(conn, "POST /api/v1/write HTTP/1.1\r\nHost: tandem\r\nContent-Length: 2\r\n\r\nok")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if !closedWithin(conn, 3*time.Second) {
			t.Error("idle keep-alive connection not closed")
		}
	})
}

// TestHTTPServerDefaults: the flags' defaults reach the server; no
// WriteTimeout, which would cut off long queries.
func TestHTTPServerDefaults(t *testing.T) {
	c, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(http.NotFoundHandler(), c.server)
	if srv.ReadHeaderTimeout != 30*time.Second || srv.ReadTimeout != time.Minute || srv.IdleTimeout != 5*time.Minute || srv.WriteTimeout != 0 {
		t.Errorf("timeouts: header %v, read %v, idle %v, write %v", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.IdleTimeout, srv.WriteTimeout)
	}
	c, err = parseFlags(strings.Fields("--web.read-timeout=2m --web.idle-timeout=90s --web.read-header-timeout=5s"))
	if err != nil {
		t.Fatal(err)
	}
	if c.server != (serverTimeouts{readHeader: 5 * time.Second, read: 2 * time.Minute, idle: 90 * time.Second}) {
		t.Errorf("parsed %+v", c.server)
	}
}

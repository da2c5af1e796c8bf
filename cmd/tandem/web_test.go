package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"golang.org/x/crypto/bcrypt"
)

// testCert writes a self-signed certificate for 127.0.0.1 (and localhost)
// and its key into dir; it returns the files and a pool trusting it.
func testCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "tandem test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeFileT(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFileT(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// writeWebConfig writes a Prometheus web configuration file serving TLS with
// the certificate and key and accepting user with password (bcrypt at the
// lowest cost, to keep the test fast). The file is replaced atomically, as a
// configuration management tool would, so a running tandem never reads half.
func writeWebConfig(t *testing.T, path, certFile, keyFile, user, password string) {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nhttp_server_config:\n  headers:\n    X-Frame-Options: deny\nbasic_auth_users:\n  %s: %s\n",
		certFile, keyFile, user, hash)
	tmp := path + ".tmp"
	writeFileT(t, tmp, []byte(cfg))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// secureTandem is a tandem serving HTTPS with basic auth.
type secureTandem struct {
	*tandemProc
	addr   string
	client *http.Client // trusts the test certificate
}

// startSecureTandem starts tandem with --web.config.file=webConfig and waits
// until /-/ready answers over TLS with user's credentials.
func startSecureTandem(t *testing.T, dataDir, webConfig string, pool *x509.CertPool, user, password string, args ...string) *secureTandem {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := &tandemProc{t: t, url: "https://" + addr, dir: dataDir, log: &bytes.Buffer{}, waited: make(chan struct{})}
	all := append([]string{"--web.listen-address=" + addr, "--storage.path=" + dataDir, "--log.level=warn", "--web.config.file=" + webConfig}, args...)
	p.cmd = exec.Command(tandemBin, all...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.waited) }()
	t.Cleanup(func() { p.signal(syscall.SIGKILL) })
	s := &secureTandem{tandemProc: p, addr: addr, client: &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}}
	t.Cleanup(s.client.CloseIdleConnections)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-p.waited:
			t.Fatalf("tandem exited before ready: %v\n%s", p.cmd.ProcessState, p.log)
		default:
		}
		if code, _ := s.do(t, http.MethodGet, "/-/ready", user, password, nil); code == http.StatusOK {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("tandem not ready over TLS after 30s\n%s", p.log)
		}
	}
}

// do sends a request over TLS (with basic auth unless user is empty) and
// returns the status code and body; a transport error is code 0.
func (s *secureTandem) do(t *testing.T, method, path, user, password string, req *http.Request) (int, string) {
	t.Helper()
	if req == nil {
		var err error
		if req, err = http.NewRequest(method, s.url+path, nil); err != nil {
			t.Fatal(err)
		}
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// remoteWrite returns a remote-write 1.0 request of one sample of name to base.
func remoteWrite(t *testing.T, base, name string, ts int64, v float64) *http.Request {
	t.Helper()
	wr := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: name}, {Name: "instance", Value: "a"}, {Name: "job", Value: "web"}},
		Samples: []prompb.Sample{{Timestamp: ts, Value: v}},
	}}}
	raw, err := wr.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/write", bytes.NewReader(snappy.Encode(nil, raw)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	return req
}

// TestWebSecurityTLSAndBasicAuth serves tandem with a web configuration file
// (TLS with a certificate made here, one bcrypt basic-auth user): every
// endpoint refuses requests without valid credentials (401) and plain HTTP,
// accepts them over TLS, and a changed password hash takes effect without a
// restart.
func TestWebSecurityTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := testCert(t, dir)
	webConfig := filepath.Join(dir, "web.yml")
	writeWebConfig(t, webConfig, certFile, keyFile, "alice", "first-secret")
	s := startSecureTandem(t, filepath.Join(dir, "data"), webConfig, pool, "alice", "first-secret")
	now := time.Now().UnixMilli()
	query := "/api/v1/query?" + url.Values{"query": {"web_test_metric"}}.Encode()

	// Without credentials, or with wrong ones: 401 asking for basic auth.
	for _, c := range []struct{ user, password string }{{"", ""}, {"alice", "wrong"}, {"mallory", "first-secret"}} {
		for _, path := range []string{query, "/api/v1/labels", "/metrics", "/-/ready", "/-/healthy", "/api/v1/status/groups"} {
			req, _ := http.NewRequest(http.MethodGet, s.url+path, nil)
			if code, body := s.do(t, "", "", c.user, c.password, req); code != http.StatusUnauthorized {
				t.Errorf("GET %s as %q/%q: HTTP %d, want 401: %s", path, c.user, c.password, code, body)
			}
		}
		if code, body := s.do(t, "", "", c.user, c.password, remoteWrite(t, s.url, "web_test_metric", now, 1)); code != http.StatusUnauthorized {
			t.Errorf("remote write as %q/%q: HTTP %d, want 401: %s", c.user, c.password, code, body)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, s.url+"/api/v1/labels", nil)
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("WWW-Authenticate"); got != "Basic" {
		t.Errorf("WWW-Authenticate = %q, want Basic", got)
	}

	// Plain HTTP is refused, credentials or not.
	plain, err := http.NewRequest(http.MethodGet, "http://"+s.addr+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain.SetBasicAuth("alice", "first-secret")
	if resp, err := http.DefaultClient.Do(plain); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "HTTPS") {
			t.Errorf("plain HTTP: HTTP %d, want 400 (HTTP request to an HTTPS server): %s", resp.StatusCode, body)
		}
	}
	// A client that does not trust the certificate fails the handshake.
	if _, err := http.Get(s.url + "/-/healthy"); err == nil || !errors.As(err, new(*tls.CertificateVerificationError)) {
		t.Errorf("GET over TLS without trusting the certificate: %v, want a certificate verification error", err)
	}

	// With the credentials over TLS: written, queryable, headers of http_server_config.
	if code, body := s.do(t, "", "", "alice", "first-secret", remoteWrite(t, s.url, "web_test_metric", now, 42)); code != http.StatusNoContent {
		t.Fatalf("remote write with credentials: HTTP %d: %s", code, body)
	}
	checkQuery := func(user, password string) {
		t.Helper()
		code, body := s.do(t, http.MethodGet, query, user, password, nil)
		if code != http.StatusOK || !strings.Contains(body, `"web_test_metric"`) || !strings.Contains(body, `"42"`) {
			t.Fatalf("query as %s: HTTP %d, want web_test_metric = 42: %s", user, code, body)
		}
	}
	checkQuery("alice", "first-secret")
	req, _ = http.NewRequest(http.MethodGet, s.url+"/-/healthy", nil)
	req.SetBasicAuth("alice", "first-secret")
	if resp, err := s.client.Do(req); err != nil || resp.Header.Get("X-Frame-Options") != "deny" {
		t.Errorf("X-Frame-Options of http_server_config.headers missing: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}

	// A new password hash takes effect at once, on the same connections.
	writeWebConfig(t, webConfig, certFile, keyFile, "alice", "second-secret")
	if code, _ := s.do(t, http.MethodGet, query, "alice", "first-secret", nil); code != http.StatusUnauthorized {
		t.Errorf("old password after the change: HTTP %d, want 401", code)
	}
	checkQuery("alice", "second-secret")
	if code, body := s.do(t, "", "", "alice", "second-secret", remoteWrite(t, s.url, "web_test_metric", now+1000, 43)); code != http.StatusNoContent {
		t.Errorf("remote write with the new password: HTTP %d: %s", code, body)
	}
}

// TestWebConfigValidation: a web configuration file that does not load and
// an invalid --web.cors.origin stop tandem at start-up (exit status 2) with
// an error naming the flag.
func TestWebConfigValidation(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := testCert(t, dir)
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		writeFileT(t, p, []byte(content))
		return p
	}
	good := filepath.Join(dir, "good.yml")
	writeWebConfig(t, good, certFile, keyFile, "alice", "pw")
	if _, err := parseFlags([]string{"--web.config.file=" + good, `--web.cors.origin=https?://(a|b)\.example`}); err != nil {
		t.Fatalf("valid settings refused: %v", err)
	}
	for name, args := range map[string][]string{
		"missing file":     {"--web.config.file=" + filepath.Join(dir, "absent.yml")},
		"unknown key":      {"--web.config.file=" + file("unknown.yml", "tls_server_config:\n  cert_file: "+certFile+"\n  key_file: "+keyFile+"\nbasic_auth:\n  x: y\n")},
		"missing key file": {"--web.config.file=" + file("nokey.yml", "tls_server_config:\n  cert_file: "+certFile+"\n  key_file: "+filepath.Join(dir, "absent.key")+"\n")},
		"cert without key": {"--web.config.file=" + file("nokeyfield.yml", "tls_server_config:\n  cert_file: "+certFile+"\n")},
		"bad YAML":         {"--web.config.file=" + file("bad.yml", "tls_server_config: [\n")},
		"plain password":   {"--web.config.file=" + file("plain.yml", "basic_auth_users:\n  alice: not-a-bcrypt-hash\n")},
		"bad header":       {"--web.config.file=" + file("header.yml", "http_server_config:\n  headers:\n    X-Frame-Options: always\n")},
		"invalid CORS":     {"--web.cors.origin=(unclosed"},
	} {
		wantFlag := "--web.config.file"
		if name == "invalid CORS" {
			wantFlag = "--web.cors.origin"
		}
		if _, err := parseFlags(args); err == nil || !strings.Contains(err.Error(), wantFlag) {
			t.Errorf("%s: parseFlags error %v, want one naming %s", name, err, wantFlag)
		}
	}
	// The binary exits with status 2, before it listens or opens storage.
	cmd := exec.Command(tandemBin, "--storage.path="+filepath.Join(dir, "data"), "--web.listen-address=127.0.0.1:0",
		"--web.config.file="+filepath.Join(dir, "nokey.yml"))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "--web.config.file") {
		t.Errorf("tandem with a broken web configuration: %v, want exit status 2 naming --web.config.file:\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("tandem with a broken web configuration created its data directory: %v", err)
	}
}

// apiFeatures returns the api category of /api/v1/features.
func apiFeatures(t *testing.T, p *tandemProc) map[string]bool {
	t.Helper()
	var f map[string]map[string]bool
	p.api(t, "/api/v1/features", nil, false, &f)
	return f["api"]
}

// httpDo sends method path to p and returns the code, body and headers.
func httpDo(t *testing.T, p *tandemProc, method, path string, header map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, p.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

// TestWebDefaultsClosed: without their flags the lifecycle endpoints answer
// 403 (Prometheus's answer) and the profiler 404; any origin may read the API.
func TestWebDefaultsClosed(t *testing.T) {
	p := startTandem(t, t.TempDir())
	for _, path := range []string{"/-/reload", "/-/quit"} {
		for _, method := range []string{http.MethodPost, http.MethodPut} {
			if code, body, _ := httpDo(t, p, method, path, nil); code != http.StatusForbidden || strings.TrimSpace(body) != "Lifecycle API is not enabled." {
				t.Errorf("%s %s without --web.enable-lifecycle: HTTP %d %q, want 403 \"Lifecycle API is not enabled.\"", method, path, code, body)
			}
		}
		if code, _, _ := httpDo(t, p, http.MethodGet, path, nil); code != http.StatusMethodNotAllowed {
			t.Errorf("GET %s: HTTP %d, want 405", path, code)
		}
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1"} {
		if code, _, _ := httpDo(t, p, http.MethodGet, path, nil); code != http.StatusNotFound {
			t.Errorf("GET %s without --web.enable-pprof: HTTP %d, want 404", path, code)
		}
	}
	if f := apiFeatures(t, p); f["lifecycle"] || f["admin"] {
		t.Errorf("features api = %v, want lifecycle and admin disabled", f)
	}
	for _, path := range []string{"/api/v1/query?query=1", "/api/v1/metadata"} {
		if _, _, h := httpDo(t, p, http.MethodGet, path, map[string]string{"Origin": "https://anywhere.example"}); h.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: Access-Control-Allow-Origin %q, want * (default --web.cors.origin=.*)", path, h.Get("Access-Control-Allow-Origin"))
		}
	}
	select {
	case <-p.waited:
		t.Fatalf("tandem exited after a refused /-/quit:\n%s", p.log)
	default:
	}
}

// TestWebLifecyclePprofCORS turns the flags on: the profiler answers, the API
// names only a matching origin in CORS headers, /-/reload reloads and
// /-/quit shuts tandem down cleanly (exit status 0).
func TestWebLifecyclePprofCORS(t *testing.T) {
	p := startTandem(t, t.TempDir(), "--web.enable-lifecycle", "--web.enable-pprof", `--web.cors.origin=https://grafana\.example`, "--log.level=info")
	if code, body, _ := httpDo(t, p, http.MethodGet, "/debug/pprof/cmdline", nil); code != http.StatusOK || !strings.Contains(body, "--web.enable-pprof") {
		t.Errorf("GET /debug/pprof/cmdline: HTTP %d %q", code, body)
	}
	if code, body, _ := httpDo(t, p, http.MethodGet, "/debug/pprof/heap?debug=1", nil); code != http.StatusOK || !strings.Contains(body, "heap profile") {
		t.Errorf("GET /debug/pprof/heap: HTTP %d", code)
	}
	for _, path := range []string{"/api/v1/query?query=1", "/api/v1/metadata", "/api/v1/labels"} {
		for origin, want := range map[string]string{
			"https://grafana.example":      "https://grafana.example",
			"https://grafana.example.evil": "",
			"https://evil.example":         "",
		} {
			if code, _, h := httpDo(t, p, http.MethodGet, path, map[string]string{"Origin": origin}); code != http.StatusOK || h.Get("Access-Control-Allow-Origin") != want {
				t.Errorf("%s from %s: HTTP %d, Access-Control-Allow-Origin %q, want %q", path, origin, code, h.Get("Access-Control-Allow-Origin"), want)
			}
		}
	}
	var flags map[string]string
	p.api(t, "/api/v1/status/flags", nil, false, &flags)
	if flags["web.enable-lifecycle"] != "true" || flags["web.cors.origin"] != `https://grafana\.example` || flags["web.enable-pprof"] != "true" {
		t.Errorf("status/flags = %v", flags)
	}
	if f := apiFeatures(t, p); !f["lifecycle"] {
		t.Errorf("features api = %v, want lifecycle enabled", f)
	}
	if code, body, _ := httpDo(t, p, http.MethodPost, "/-/reload", nil); code != http.StatusOK {
		t.Errorf("POST /-/reload: HTTP %d %q, want 200", code, body)
	}
	if code, body, _ := httpDo(t, p, http.MethodPut, "/-/quit", nil); code != http.StatusOK || body != "Requesting termination... Goodbye!" {
		t.Errorf("PUT /-/quit: HTTP %d %q", code, body)
	}
	select {
	case <-p.waited:
	case <-time.After(20 * time.Second):
		t.Fatalf("tandem still running 20s after /-/quit:\n%s", p.log)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(p.log.String(), "received /-/quit") {
		t.Errorf("tandem after /-/quit: exit status %d, want 0 and the request logged:\n%s", code, p.log)
	}
	if strings.Contains(p.log.String(), "level=ERROR") {
		t.Errorf("errors logged during the shutdown:\n%s", p.log)
	}
}

// jsonBody decodes an API envelope's data from body.
func jsonBody(t *testing.T, body string, out any) {
	t.Helper()
	var r apiResponse
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Status != "success" {
		t.Fatalf("API answer %v: %s", err, body)
	}
	if err := json.Unmarshal(r.Data, out); err != nil {
		t.Fatalf("decode data: %v: %s", err, r.Data)
	}
}

// Package bench runs tandem, VictoriaMetrics and Prometheus side by side on
// the same pre-encoded remote-write workload and measures ingest rate, CPU
// per sample, peak memory, bytes on disk and query latency (cmd/tandem-bench).
package bench

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Kind names a system under test.
type Kind string

// The systems the harness knows how to run.
const (
	Tandem          Kind = "tandem"
	VictoriaMetrics Kind = "victoriametrics"
	Prometheus      Kind = "prometheus"
)

// Peer is one running system: a process on loopback with its own data directory.
type Peer struct {
	Kind    Kind
	Version string
	Addr    string // host:port
	DataDir string
	cmd     *exec.Cmd
	logFile *os.File
}

// PeerConfig says how to start a peer.
type PeerConfig struct {
	Kind    Kind
	Binary  string
	WorkDir string   // the peer's data directory and log go below it
	Extra   []string // extra command-line flags
	// DataDir, when set, is opened as it is (a restart on data written
	// before: a snapshot or an earlier process's directory) instead of a
	// fresh directory below WorkDir; the log is then "log.restart".
	DataDir string
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// StartPeer starts the peer with a fresh data directory and waits until it is ready.
func StartPeer(ctx context.Context, pc PeerConfig) (*Peer, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(pc.WorkDir, string(pc.Kind))
	data, logName := pc.DataDir, "log.restart"
	if data == "" {
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("clean %s: %w", dir, err)
		}
		data, logName = filepath.Join(dir, "data"), "log"
		if err := os.MkdirAll(data, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", data, err)
		}
	}
	var args []string
	switch pc.Kind {
	case Tandem:
		// --web.enable-pprof: the harness profiles every system (ProfileDir).
		args = []string{"--storage.path=" + data, "--web.listen-address=" + addr, "--web.enable-admin-api", "--web.enable-pprof", "--log.level=warn"}
	case Prometheus:
		cfg := filepath.Join(dir, "prometheus.yml")
		if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 15s\n"), 0o644); err != nil {
			return nil, fmt.Errorf("write prometheus config: %w", err)
		}
		args = []string{"--config.file=" + cfg, "--storage.tsdb.path=" + data, "--web.listen-address=" + addr,
			"--web.enable-remote-write-receiver", "--web.enable-admin-api", "--log.level=warn",
			"--web.remote-write-receiver.accepted-protobuf-messages=prometheus.WriteRequest",
			"--web.remote-write-receiver.accepted-protobuf-messages=io.prometheus.write.v2.Request"}
	case VictoriaMetrics:
		// No rollup result cache: repeated query runs must measure the
		// query, as for the other systems; no latency offset, so the newest
		// samples are visible at once as in the others.
		args = []string{"-storageDataPath=" + data, "-httpListenAddr=" + addr, "-retentionPeriod=100y",
			"-search.disableCache", "-search.latencyOffset=0s", "-loggerLevel=ERROR"}
	default:
		return nil, fmt.Errorf("unknown peer kind %q", pc.Kind)
	}
	args = append(args, pc.Extra...)
	logFile, err := os.Create(filepath.Join(dir, logName))
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	cmd := exec.Command(pc.Binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", pc.Binary, err)
	}
	p := &Peer{Kind: pc.Kind, Addr: addr, DataDir: data, cmd: cmd, logFile: logFile}
	if err := p.waitReady(ctx, 2*time.Minute); err != nil {
		p.Stop()
		return nil, fmt.Errorf("%s not ready: %w (log: %s)", pc.Kind, err, tail(logFile.Name()))
	}
	p.Version = p.version(ctx)
	if p.Version == "" || p.Version == "unknown" {
		// Binaries built with go install carry no version string of their
		// own, but the module version is in the Go build information.
		if bi, err := buildinfo.ReadFile(pc.Binary); err == nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			p.Version = bi.Main.Version
		}
	}
	return p, nil
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

func (p *Peer) readyPath() string {
	if p.Kind == VictoriaMetrics {
		return "/health"
	}
	return "/-/ready"
}

func (p *Peer) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(p.URL(p.readyPath()))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no 200 from %s within %s (last error %v)", p.readyPath(), timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p *Peer) version(ctx context.Context) string {
	if p.Kind == VictoriaMetrics {
		// vm_app_version{version="victoria-metrics-..."} in /metrics.
		m, err := p.Metrics(ctx)
		if err == nil {
			for line := range strings.SplitSeq(m, "\n") {
				if strings.HasPrefix(line, "vm_app_version{") {
					if i := strings.Index(line, `version="`); i >= 0 {
						v := line[i+len(`version="`):]
						return v[:strings.IndexByte(v, '"')]
					}
				}
			}
		}
		return "unknown"
	}
	var bi struct {
		Data struct {
			Version string `json:"version"`
		} `json:"data"`
	}
	if err := p.getJSON(ctx, "/api/v1/status/buildinfo", &bi); err != nil {
		return "unknown"
	}
	return bi.Data.Version
}

// URL is the peer's URL for path.
func (p *Peer) URL(path string) string { return "http://" + p.Addr + path }

// WritePath is the remote-write endpoint.
func (p *Peer) WritePath() string { return "/api/v1/write" }

// PID is the server's process id.
func (p *Peer) PID() int { return p.cmd.Process.Pid }

// Metrics returns the peer's /metrics text.
func (p *Peer) Metrics(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL("/metrics"), nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("get /metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func (p *Peer) getJSON(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL(path), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: %s: %s", path, resp.Status, b)
	}
	return json.Unmarshal(b, out)
}

func (p *Peer) post(ctx context.Context, path string, form url.Values) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL(path), strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("post %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if resp.StatusCode/100 != 2 {
		return b, fmt.Errorf("post %s: %s: %s", path, resp.Status, b)
	}
	return b, nil
}

// Stop terminates the peer and waits for it; a second call does nothing.
func (p *Peer) Stop() {
	if p.cmd.Process != nil && p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			p.cmd.Process.Kill()
			<-done
		}
	}
	p.logFile.Close()
}

// ProcStats is what /proc tells about a process.
type ProcStats struct {
	CPUSeconds float64 // user + system
	RSSBytes   int64   // VmRSS
	HWMBytes   int64   // VmHWM: peak resident set
}

// Proc reads the peer's CPU time and memory from /proc.
func (p *Peer) Proc() (ProcStats, error) { return readProc(p.PID()) }

// clockTicks is USER_HZ, 100 on Linux for every architecture Go supports.
const clockTicks = 100

func readProc(pid int) (ProcStats, error) {
	var st ProcStats
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, fmt.Errorf("read stat: %w", err)
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return st, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	st.CPUSeconds = (utime + stime) / clockTicks
	fh, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, fmt.Errorf("read status: %w", err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fs[0], 10, 64)
		switch k {
		case "VmRSS":
			st.RSSBytes = n * 1024
		case "VmHWM":
			st.HWMBytes = n * 1024
		}
	}
	return st, sc.Err()
}

// DirSize is the total size of the regular files below dir (hard links
// counted once per path: a snapshot's links are its size).
func DirSize(dir string) (int64, error) {
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", dir, err)
	}
	return n, nil
}

// Persisted is the peer's data written to its on-disk format (Persist).
type Persisted struct {
	Dir   string // a data directory holding all of it, for a restart (PeerConfig.DataDir)
	Bytes int64  // its size
}

// Persist makes the peer write everything it holds to its on-disk format,
// merged as far as the system goes, and returns where and how large that
// data is: tandem and Prometheus write a snapshot including the head (blocks
// as persisted plus the head as one block); VictoriaMetrics flushes and
// merges its parts, and its storage directory is measured once merges have
// finished.
func (p *Peer) Persist(ctx context.Context) (Persisted, error) {
	switch p.Kind {
	case Tandem, Prometheus:
		b, err := p.post(ctx, "/api/v1/admin/tsdb/snapshot", url.Values{"skip_head": {"false"}})
		if err != nil {
			return Persisted{}, err
		}
		var r struct {
			Data struct {
				Name string `json:"name"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return Persisted{}, fmt.Errorf("decode snapshot response: %w", err)
		}
		dir := filepath.Join(p.DataDir, "snapshots", r.Data.Name)
		n, err := DirSize(dir)
		return Persisted{Dir: dir, Bytes: n}, err
	case VictoriaMetrics:
		n, err := p.flushMerged(ctx)
		return Persisted{Dir: p.DataDir, Bytes: n}, err
	}
	return Persisted{}, fmt.Errorf("unknown peer kind %q", p.Kind)
}

// flushMerged makes VictoriaMetrics write its in-memory parts and merge
// them, and returns the size of its data once the merges are done.
func (p *Peer) flushMerged(ctx context.Context) (int64, error) {
	if _, err := p.post(ctx, "/internal/force_flush", nil); err != nil {
		return 0, err
	}
	if _, err := p.post(ctx, "/internal/force_merge", nil); err != nil {
		return 0, err
	}
	// force_merge starts merges in the background: wait for them, then
	// until the size holds still.
	var last int64 = -1
	deadline := time.Now().Add(10 * time.Minute)
	for stable := 0; stable < 3; {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("merges still running after 10 minutes")
		}
		time.Sleep(time.Second)
		m, err := p.Metrics(ctx)
		if err != nil {
			return 0, err
		}
		if activeMerges(m) > 0 {
			stable = 0
			continue
		}
		n, err := vmSize(p.DataDir)
		if err != nil {
			return 0, err
		}
		if n == last {
			stable++
		} else {
			stable, last = 0, n
		}
	}
	return last, nil
}

// vmSize is the size of VictoriaMetrics' data and index (not its caches,
// which it rebuilds, nor flock files).
func vmSize(dir string) (int64, error) {
	var total int64
	for _, sub := range []string{"data", "indexdb"} {
		p := filepath.Join(dir, sub)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		n, err := DirSize(p)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

func activeMerges(metrics string) float64 {
	var sum float64
	for line := range strings.SplitSeq(metrics, "\n") {
		if strings.HasPrefix(line, "vm_active_merges") {
			if i := strings.LastIndexByte(line, ' '); i > 0 {
				v, _ := strconv.ParseFloat(line[i+1:], 64)
				sum += v
			}
		}
	}
	return sum
}

// BuildTandem builds cmd/tandem of the module holding the working directory
// into out.
func BuildTandem(ctx context.Context, out string) error {
	dir, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("build tandem: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		if filepath.Dir(dir) == dir {
			return fmt.Errorf("build tandem: no go.mod above the working directory")
		}
		dir = filepath.Dir(dir)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/tandem")
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build tandem: %w\n%s", err, b)
	}
	return nil
}

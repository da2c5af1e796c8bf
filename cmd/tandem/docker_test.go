package main

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// dockerDir holds the Dockerfile and the docker-compose setup.
const dockerDir = "../../docker"

// composeFile is the part of docker-compose.yml the test reads.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       map[string]string `yaml:"build"`
		Command     []string          `yaml:"command"`
		Volumes     []string          `yaml:"volumes"`
		Environment map[string]string `yaml:"environment"`
	} `yaml:"services"`
}

// composeMounts maps each bind mount's container path to its file on the
// host; every bind-mounted file or folder must exist.
func composeMounts(t *testing.T, service string, volumes []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, v := range volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], ".") {
			continue // a named volume
		}
		src := filepath.Join(dockerDir, parts[0])
		if _, err := os.Stat(src); err != nil {
			t.Errorf("service %s mounts %s, which does not exist: %v", service, parts[0], err)
		}
		out[parts[1]] = src
	}
	return out
}

// hostPath resolves a container path through the mounts (longest prefix).
func hostPath(mounts map[string]string, p string) (string, bool) {
	best := ""
	for dst := range mounts {
		if (p == dst || strings.HasPrefix(p, dst+"/")) && len(dst) > len(best) {
			best = dst
		}
	}
	if best == "" {
		return "", false
	}
	return filepath.Join(mounts[best], strings.TrimPrefix(p, best)), true
}

// flagValue returns the value of --name=value in args.
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

func readYAML(t *testing.T, path string, out any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestDockerCompose checks docker/docker-compose.yml: the services, that
// every mounted file exists, that tandem's flags parse, that Prometheus and
// tandem mount the prometheus.yml and rules.yml that TestPrometheusEndToEnd
// runs, Alertmanager's configuration (amtool), and Grafana's provisioning
// (data source pointing at tandem, dashboards folder holding tandem.json).
func TestDockerCompose(t *testing.T) {
	var c composeFile
	readYAML(t, filepath.Join(dockerDir, "docker-compose.yml"), &c)
	var names []string
	for n := range c.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{"alertmanager", "grafana", "node-exporter", "prometheus", "tandem"}; !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}

	// tandem: flags, rules file, Alertmanager.
	td := c.Services["tandem"]
	if td.Build["dockerfile"] != "docker/Dockerfile" || td.Build["context"] != ".." {
		t.Errorf("tandem is built with %v, want context .. and docker/Dockerfile", td.Build)
	}
	cfg, err := parseFlags(td.Command)
	if err != nil {
		t.Fatalf("tandem's command in docker-compose.yml: %v", err)
	}
	mounts := composeMounts(t, "tandem", td.Volumes)
	if len(cfg.ruleFiles) != 1 {
		t.Fatalf("tandem has rule files %v, want docker/rules.yml", cfg.ruleFiles)
	}
	if p, ok := hostPath(mounts, cfg.ruleFiles[0]); !ok || filepath.Clean(p) != filepath.Clean(dockerRules) {
		t.Errorf("tandem's --rules.file %s is %q on the host, want %s", cfg.ruleFiles[0], p, dockerRules)
	}
	if len(cfg.alertmanagers) != 1 {
		t.Fatalf("tandem sends alerts to %v, want the alertmanager service", cfg.alertmanagers)
	}
	if u, err := url.Parse(cfg.alertmanagers[0]); err != nil || u.Host != "alertmanager:9093" {
		t.Errorf("--alertmanager.url %s, want http://alertmanager:9093", cfg.alertmanagers[0])
	}
	if cfg.storagePath != "/data" {
		t.Errorf("tandem's --storage.path %s, want /data (the image's volume)", cfg.storagePath)
	}

	// Prometheus runs the prometheus.yml of TestPrometheusEndToEnd.
	pr := c.Services["prometheus"]
	mounts = composeMounts(t, "prometheus", pr.Volumes)
	if p, ok := hostPath(mounts, flagValue(pr.Command, "config.file")); !ok || filepath.Clean(p) != filepath.Clean(dockerPrometheusConfig) {
		t.Errorf("Prometheus's --config.file is %q on the host, want %s", p, dockerPrometheusConfig)
	}
	if !strings.HasPrefix(pr.Image, "prom/prometheus:v3.") {
		t.Errorf("Prometheus image %s, want prom/prometheus:v3.x (remote write 2.0)", pr.Image)
	}

	// Alertmanager's configuration is valid.
	am := c.Services["alertmanager"]
	mounts = composeMounts(t, "alertmanager", am.Volumes)
	amCfg, ok := hostPath(mounts, flagValue(am.Command, "config.file"))
	if !ok {
		t.Fatalf("Alertmanager's --config.file %s is not mounted", flagValue(am.Command, "config.file"))
	}
	amtool := filepath.Join(filepath.Dir(alertmanagerBin), "amtool")
	if out, err := exec.Command(amtool, "check-config", amCfg).CombinedOutput(); err != nil {
		t.Errorf("amtool check-config %s (amtool from Debian's prometheus-alertmanager, installed by .ci/run): %v\n%s", amCfg, err, out)
	}

	checkGrafanaProvisioning(t, c.Services["grafana"].Volumes, c.Services["grafana"].Environment)
}

func checkGrafanaProvisioning(t *testing.T, volumes []string, env map[string]string) {
	t.Helper()
	mounts := composeMounts(t, "grafana", volumes)
	dsDir, ok := hostPath(mounts, "/etc/grafana/provisioning/datasources")
	if !ok {
		t.Fatal("Grafana's datasources provisioning folder is not mounted")
	}
	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name     string         `yaml:"name"`
			Type     string         `yaml:"type"`
			URL      string         `yaml:"url"`
			JSONData map[string]any `yaml:"jsonData"`
		} `yaml:"datasources"`
	}
	readYAML(t, filepath.Join(dsDir, "tandem.yml"), &ds)
	found := false
	for _, d := range ds.Datasources {
		if d.URL != "http://tandem:9201" {
			continue
		}
		found = true
		if d.Type != "prometheus" || d.JSONData["prometheusType"] != "Prometheus" || d.JSONData["httpMethod"] != "POST" {
			t.Errorf("Grafana data source %s: type %s, jsonData %v; want prometheus, prometheusType Prometheus, httpMethod POST", d.Name, d.Type, d.JSONData)
		}
	}
	if ds.APIVersion != 1 || !found {
		t.Errorf("Grafana data sources (apiVersion %d) have none at http://tandem:9201", ds.APIVersion)
	}

	dbDir, ok := hostPath(mounts, "/etc/grafana/provisioning/dashboards")
	if !ok {
		t.Fatal("Grafana's dashboards provisioning folder is not mounted")
	}
	var prov struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Type    string            `yaml:"type"`
			Options map[string]string `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, filepath.Join(dbDir, "tandem.yml"), &prov)
	if prov.APIVersion != 1 || len(prov.Providers) != 1 || prov.Providers[0].Type != "file" {
		t.Fatalf("Grafana dashboard providers: %+v, want one of type file", prov)
	}
	dir, ok := hostPath(mounts, prov.Providers[0].Options["path"])
	if !ok {
		t.Fatalf("the dashboards provider reads %s, which is not mounted", prov.Providers[0].Options["path"])
	}
	if filepath.Clean(dir) != filepath.Clean(filepath.Dir(dashboardFile)) {
		t.Errorf("Grafana provisions dashboards from %s, want %s", dir, filepath.Dir(dashboardFile))
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if !slices.Contains(files, filepath.Join(dir, "tandem.json")) {
		t.Errorf("%s holds %v, no tandem.json", dir, files)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		var d grafanaDashboard
		if err == nil {
			err = json.Unmarshal(raw, &d)
		}
		if err != nil || d.UID == "" {
			t.Errorf("provisioned dashboard %s: %v, uid %q", f, err, d.UID)
		}
	}
	if home := env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home != "" {
		if p, ok := hostPath(mounts, home); !ok {
			t.Errorf("Grafana's home dashboard %s is not mounted", home)
		} else if _, err := os.Stat(p); err != nil {
			t.Errorf("Grafana's home dashboard: %v", err)
		}
	}
}

// dockerfile is the instructions of docker/Dockerfile, continuation lines joined.
func dockerfile(t *testing.T) [][2]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dockerDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][2]string
	var cur string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if l, ok := strings.CutSuffix(line, "\\"); ok {
			cur += l + " "
			continue
		}
		cur += line
		instr, args, _ := strings.Cut(cur, " ")
		out = append(out, [2]string{strings.ToUpper(instr), strings.TrimSpace(args)})
		cur = ""
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDockerfile checks docker/Dockerfile against the repository and runs
// its build: the Go image matches go.mod, the build is static (CGO_ENABLED=0:
// the binary has no ELF interpreter), the image runs as a non-root user with
// /data as volume, and the binary started with the image's CMD (address
// moved to 127.0.0.1) answers the HEALTHCHECK's /-/ready on the EXPOSEd port.
func TestDockerfile(t *testing.T) {
	ins := dockerfile(t)
	get := func(name string) []string {
		var out []string
		for _, i := range ins {
			if i[0] == name {
				out = append(out, i[1])
			}
		}
		return out
	}
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if from := get("FROM"); len(from) < 2 || !strings.HasPrefix(from[0], "golang:"+string(goVer[1])) {
		t.Errorf("FROM %v: want a multi-stage build from golang:%s", from, goVer[1])
	}
	var build string
	for _, r := range get("RUN") {
		if strings.Contains(r, "go build") {
			build = r
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "./cmd/tandem", "-o /out/tandem"} {
		if !strings.Contains(build, want) {
			t.Errorf("the build step %q lacks %s", build, want)
		}
	}
	if u := get("USER"); len(u) != 1 || u[0] == "root" || strings.HasPrefix(u[0], "0") {
		t.Errorf("USER %v: want a non-root user", u)
	}
	if v := get("VOLUME"); len(v) != 1 || v[0] != `["/data"]` {
		t.Errorf("VOLUME %v, want [\"/data\"]", v)
	}
	if e := get("EXPOSE"); len(e) != 1 || e[0] != "9201" {
		t.Errorf("EXPOSE %v, want 9201", e)
	}
	hc := get("HEALTHCHECK")
	if len(hc) != 1 || !strings.Contains(hc[0], "http://127.0.0.1:9201/-/ready") {
		t.Errorf("HEALTHCHECK %v: want a check of http://127.0.0.1:9201/-/ready", hc)
	}
	var cmdArgs []string
	if c := get("CMD"); len(c) != 1 || json.Unmarshal([]byte(c[0]), &cmdArgs) != nil {
		t.Fatalf("CMD %v: want the exec form", c)
	}
	cfg, err := parseFlags(cmdArgs)
	if err != nil {
		t.Fatalf("the image's CMD %v: %v", cmdArgs, err)
	}
	if cfg.listenAddress != ":9201" || cfg.storagePath != "/data" {
		t.Errorf("CMD listens on %s with data in %s, want :9201 and /data", cfg.listenAddress, cfg.storagePath)
	}

	// The build step as the Dockerfile runs it, from the repository root.
	bin := filepath.Join(t.TempDir(), "tandem")
	cmd := exec.Command("go", "build", "-buildvcs=false", "-ldflags", "-X main.version=docker-test", "-o", bin, "./cmd/tandem")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the CGO_ENABLED=0 binary has an ELF interpreter: it is not static")
		}
	}
	ef.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := make([]string, 0, len(cmdArgs))
	for _, a := range cmdArgs {
		switch {
		case strings.HasPrefix(a, "--web.listen-address="):
			a = "--web.listen-address=" + addr
		case strings.HasPrefix(a, "--storage.path="):
			a = "--storage.path=" + t.TempDir()
		}
		args = append(args, a)
	}
	p := startProcess(t, "tandem (static build)", bin, "http://"+addr+"/-/ready", args...)
	var info struct {
		Version string `json:"version"`
	}
	(&tandemProc{url: "http://" + addr}).api(t, "/api/v1/status/buildinfo", nil, false, &info)
	if info.Version != "docker-test" {
		t.Errorf("buildinfo version %q, want docker-test (set by the Dockerfile's -ldflags)", info.Version)
	}
	_ = p
}

package main

import (
	"bytes"
	"errors"
	"flag"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// writeConfig writes a configuration file named cfg.yml and returns its path.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cfg.yml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// configError parses the flags with content as configuration file and
// returns the error, failing the test if there is none.
func configError(t *testing.T, content string, args ...string) string {
	t.Helper()
	p := writeConfig(t, content)
	_, err := parseFlags(append([]string{"--config.file=" + p}, args...))
	if err == nil {
		t.Fatalf("no error for the configuration file\n%s", content)
	}
	return err.Error()
}

func TestConfigFileSetsValues(t *testing.T) {
	p := writeConfig(t, `
web:
  listen-address: "127.0.0.1:9999"
  enable-admin-api: true
storage:
  path: /tmp/somewhere
  retention:
    time: 30d
    size: 1073741824
  wal:
    sync-interval: 1h30m
head:
  chunk-rows: 240
remote-write:
  max-body-bytes: 1000
query:
  lookback-delta: 0
log:
  format: json
  level: debug
group.by: job # a dotted key works as well
`)
	c, err := parseFlags([]string{"--config.file=" + p})
	if err != nil {
		t.Fatal(err)
	}
	if c.configFile != p {
		t.Errorf("configFile %q, want %q", c.configFile, p)
	}
	if c.listenAddress != "127.0.0.1:9999" || !c.enableAdmin || c.storagePath != "/tmp/somewhere" {
		t.Errorf("listen %q, admin %v, path %q", c.listenAddress, c.enableAdmin, c.storagePath)
	}
	if c.retentionTime != 30*24*time.Hour || c.retentionSize != 1<<30 || c.walSync != 90*time.Minute {
		t.Errorf("retention %v / %d, WAL sync %v", c.retentionTime, c.retentionSize, c.walSync)
	}
	if c.chunkRows != 240 || c.limits.MaxBodyBytes != 1000 || c.lookback != 0 {
		t.Errorf("chunk rows %d, max body %d, lookback %v", c.chunkRows, c.limits.MaxBodyBytes, c.lookback)
	}
	if c.logFormat != "json" || c.logLevel != "debug" || c.groupBy != "job" {
		t.Errorf("log %s/%s, group.by %q", c.logFormat, c.logLevel, c.groupBy)
	}
	// Not in the file: defaults.
	if d, _ := parseFlags(nil); c.queryTimeout != d.queryTimeout || c.limits.MaxDecodedBytes != d.limits.MaxDecodedBytes {
		t.Errorf("unset settings changed: timeout %v, max decoded %d", c.queryTimeout, c.limits.MaxDecodedBytes)
	}
}

func TestConfigFlagsOverrideFile(t *testing.T) {
	p := writeConfig(t, `
storage:
  path: /from/file
  retention: {time: 30d, size: 100}
rules:
  file: [a.yml, b.yml]
alertmanager:
  url: [http://am1:9093]
`)
	c, err := parseFlags([]string{"--storage.path=/from/flag", "--config.file=" + p, "--rules.file=c.yml", "--storage.retention.time=2h"})
	if err != nil {
		t.Fatal(err)
	}
	if c.storagePath != "/from/flag" || c.retentionTime != 2*time.Hour {
		t.Errorf("path %q, retention %v: want the flags' /from/flag, 2h", c.storagePath, c.retentionTime)
	}
	if !slices.Equal(c.ruleFiles, []string{"c.yml"}) {
		t.Errorf("rule files %v: the flag replaces the file's list", c.ruleFiles)
	}
	if c.retentionSize != 100 || !slices.Equal(c.alertmanagers, []string{"http://am1:9093"}) {
		t.Errorf("retention size %d, alertmanagers %v: want the file's", c.retentionSize, c.alertmanagers)
	}
}

func TestConfigRepeatableFlagsAsLists(t *testing.T) {
	p := writeConfig(t, `
rules:
  file:
    - a.yml
    - rules/*.yml
alertmanager:
  url: [http://am1:9093, http://am2:9093]
`)
	c, err := parseFlags([]string{"--config.file=" + p})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.ruleFiles, []string{"a.yml", "rules/*.yml"}) {
		t.Errorf("rule files %v", c.ruleFiles)
	}
	if !slices.Equal(c.alertmanagers, []string{"http://am1:9093", "http://am2:9093"}) {
		t.Errorf("alertmanagers %v", c.alertmanagers)
	}
	msg := configError(t, "rules:\n  file: a.yml\n")
	if !strings.Contains(msg, "cfg.yml: rules.file: want a list of strings") {
		t.Errorf("a string for a list: %s", msg)
	}
}

func TestConfigUnknownKey(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"storage:\n  retention:\n    tme: 1d\n", "cfg.yml: storage.retention.tme: unknown key; known keys under storage.retention: size, time (line 3)"},
		{"stroage:\n  path: x\n", "cfg.yml: stroage: unknown key"},
		{"storage.pth: x\n", "cfg.yml: storage.pth: unknown key"},
		{"version: true\n", "cfg.yml: version: cannot be set in the configuration file"},
		{"config:\n  file: other.yml\n", "cfg.yml: config.file: cannot be set in the configuration file"},
	} {
		if msg := configError(t, tc.yaml); !strings.Contains(msg, tc.want) {
			t.Errorf("%q: error %q, want it to contain %q", tc.yaml, msg, tc.want)
		}
	}
}

func TestConfigInvalidDuration(t *testing.T) {
	msg := configError(t, "storage:\n  retention:\n    time: abc\n")
	if want := `cfg.yml: storage.retention.time: invalid duration "abc"`; !strings.Contains(msg, want) {
		t.Errorf("error %q, want it to contain %q", msg, want)
	}
	// Also when the flag overrides the file: the file is validated as a whole.
	msg = configError(t, "storage:\n  retention:\n    time: abc\n", "--storage.retention.time=1d")
	if want := `cfg.yml: storage.retention.time: invalid duration "abc"`; !strings.Contains(msg, want) {
		t.Errorf("error %q, want it to contain %q", msg, want)
	}
}

func TestConfigWrongTypesAndValues(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"head:\n  chunk-rows: ten\n", `cfg.yml: head.chunk-rows: want an integer, got the string "ten"`},
		{"head:\n  chunk-rows: 1.5\n", "cfg.yml: head.chunk-rows: want an integer, got the number 1.5"},
		{"web:\n  enable-admin-api: \"yes\"\n", "cfg.yml: web.enable-admin-api: want a boolean"},
		{"storage:\n  path: 5\n", "cfg.yml: storage.path: want a string, got the integer 5 (quote it)"},
		{"storage:\n  path:\n", `cfg.yml: storage.path: want a string, got no value (write "" for an empty value)`},
		{"storage:\n  path: {x: 1}\n", "cfg.yml: storage.path: want a string, got a mapping"},
		{"storage: 5\n", "cfg.yml: storage: want a mapping of the keys"},
		{"storage:\n  retention:\n    time: 15\n", `cfg.yml: storage.retention.time: invalid duration "15"`},
		{"rules:\n  file: [a.yml, 3]\n", "cfg.yml: rules.file: item 2: want a string"},
		{"log:\n  format: xml\n", `cfg.yml: log.format: want text or json, got "xml"`},
		{"log:\n  level: loud\n", `cfg.yml: log.level: want debug, info, warn or error, got "loud"`},
		{"rules:\n  max-concurrent-evals: -1\n", "cfg.yml: rules.max-concurrent-evals: must not be negative"},
		{"storage:\n  path: a\nstorage.path: b\n", "cfg.yml: storage.path: set more than once"},
		{"- storage\n", "cfg.yml: want a mapping of settings at the top level"},
		{"storage: [\n", "cfg.yml: yaml:"},
	} {
		if msg := configError(t, tc.yaml); !strings.Contains(msg, tc.want) {
			t.Errorf("%q: error %q, want it to contain %q", tc.yaml, msg, tc.want)
		}
	}
	// On the command line, validation errors name the flag.
	if _, err := parseFlags([]string{"--log.format=xml"}); err == nil || !strings.Contains(err.Error(), "--log.format: want text or json") {
		t.Errorf("--log.format=xml: %v", err)
	}
	if _, err := parseFlags([]string{"--rules.max-concurrent-evals=-1"}); err == nil || !strings.Contains(err.Error(), "--rules.max-concurrent-evals: must not be negative") {
		t.Errorf("--rules.max-concurrent-evals=-1: %v", err)
	}
}

func TestConfigAllErrorsReported(t *testing.T) {
	msg := configError(t, "storage:\n  retention:\n    time: abc\n  pth: x\nhead:\n  chunk-rows: x\n")
	for _, want := range []string{"storage.retention.time", "storage.pth", "head.chunk-rows"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %s", msg, want)
		}
	}
}

func TestConfigFileEmptyOrMissing(t *testing.T) {
	for _, content := range []string{"", "# only a comment\n", "---\n", "storage:\n"} {
		p := writeConfig(t, content)
		if _, err := parseFlags([]string{"--config.file=" + p}); err != nil {
			t.Errorf("%q: %v", content, err)
		}
	}
	missing := filepath.Join(t.TempDir(), "missing.yml")
	if _, err := parseFlags([]string{"--config.file=" + missing}); err == nil || !strings.Contains(err.Error(), "missing.yml") {
		t.Errorf("missing file: %v", err)
	}
	// --version does not read the file.
	if c, err := parseFlags([]string{"--config.file=" + missing, "--version"}); err != nil || !c.showVersion {
		t.Errorf("--version with a missing configuration file: %v", err)
	}
}

func TestConfigExampleLoads(t *testing.T) {
	p := writeConfig(t, exampleConfig)
	c, err := parseFlags([]string{"--config.file=" + p})
	if err != nil {
		t.Fatalf("the example in docs/configuration.md: %v", err)
	}
	if c.retentionTime != 30*24*time.Hour || len(c.ruleFiles) != 1 || c.logFormat != "json" {
		t.Errorf("example: retention %v, rule files %v, log format %s", c.retentionTime, c.ruleFiles, c.logFormat)
	}
}

// TestConfigEveryFlagSettable sets every flag in a file generated from the
// FlagSet, so a flag of a new kind cannot silently be unsettable.
func TestConfigEveryFlagSettable(t *testing.T) {
	fs := newFlagSet(&config{})
	root := map[string]any{}
	want := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if notInFile[f.Name] {
			return
		}
		var v any
		switch k := flagKind(f); k {
		case kindBool:
			v, want[f.Name] = true, "true"
		case kindInt:
			v, want[f.Name] = 7, "7"
		case kindFloat:
			v, want[f.Name] = 2.5, "2.5"
		case kindDuration:
			v, want[f.Name] = "2d", "2d"
		case kindList:
			v, want[f.Name] = []string{"x", "y"}, "x,y"
		case kindString:
			v, want[f.Name] = "text", "text" // valid for log.format
		default:
			t.Fatalf("--%s: kind %s not covered by this test", f.Name, k)
		}
		m := root
		parts := strings.Split(f.Name, ".")
		for _, p := range parts[:len(parts)-1] {
			if m[p] == nil {
				m[p] = map[string]any{}
			}
			m = m[p].(map[string]any)
		}
		m[parts[len(parts)-1]] = v
	})
	data, err := yaml.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	target := newFlagSet(&config{})
	set, err := applyConfig(target, nil, "all.yml", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	for name, w := range want {
		if !set[name] {
			t.Errorf("%s not reported as set from the file", name)
		}
		if got := target.Lookup(name).Value.String(); got != w {
			t.Errorf("%s = %q, want %q", name, got, w)
		}
	}
}

func TestFlagDurations(t *testing.T) {
	c, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.retentionTime != 15*24*time.Hour || c.maintInterval != 15*time.Second || c.lookback != 5*time.Minute {
		t.Errorf("defaults changed: retention %v, maintenance %v, lookback %v", c.retentionTime, c.maintInterval, c.lookback)
	}
	fs := newFlagSet(&config{})
	fs.VisitAll(func(f *flag.Flag) {
		if flagKind(f) != kindDuration {
			return
		}
		for in, want := range map[string]string{"1d": "1d", "1h30m": "1h30m", "90s": "1m30s", "1.5h": "1h30m", "0": "0s", "1500us": "1.5ms"} {
			if err := fs.Set(f.Name, in); err != nil {
				t.Errorf("--%s=%s: %v", f.Name, in, err)
			} else if got := f.Value.String(); got != want {
				t.Errorf("--%s=%s reads back as %q, want %q", f.Name, in, got, want)
			}
		}
	})
	if c, err := parseFlags([]string{"--storage.retention.time=2w", "--rules.evaluation-interval=1h30m"}); err != nil || c.retentionTime != 14*24*time.Hour || c.evalInterval != 90*time.Minute {
		t.Errorf("Prometheus durations as flags: %v", err)
	}
	if _, err := parseFlags([]string{"--query.timeout=abc"}); err == nil || !strings.Contains(err.Error(), `invalid duration "abc"`) {
		t.Errorf("--query.timeout=abc: %v", err)
	}
}

func TestFlagNamesAndGroups(t *testing.T) {
	fs := newFlagSet(&config{})
	titled := map[string]bool{}
	for _, g := range flagGroups {
		titled[g.name] = true
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !titled[flagGroup(f.Name)] {
			t.Errorf("--%s: group %q has no heading in flagGroups", f.Name, flagGroup(f.Name))
		}
		// A YAML key cannot be both a value and a section.
		if isSection(fs, f.Name) {
			t.Errorf("--%s is also the prefix of other flags; the configuration file cannot hold both", f.Name)
		}
		if f.Usage == "" {
			t.Errorf("--%s has no help text", f.Name)
		}
	})
}

func TestHelpOutput(t *testing.T) {
	for _, arg := range []string{"--help", "-h", "-help"} {
		if _, err := parseFlags([]string{arg}); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s: %v, want flag.ErrHelp", arg, err)
		}
	}
	var b bytes.Buffer
	writeUsage(&b, newFlagSet(&config{}))
	out := b.String()
	for _, g := range flagGroups {
		if !strings.Contains(out, "\n"+g.title+":\n") {
			t.Errorf("--help has no heading %q", g.title)
		}
	}
	for _, want := range []string{
		"  --storage.retention.time=<duration>  default: 15d\n",
		"  --web.listen-address=<string>  default: \":9201\"\n",
		"  --rules.file=<string> (repeatable)\n",
		"  --config.file=<string>\n",
		"  --version\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	// Groups in flagGroups' order: web before storage before log.
	if i, j, k := strings.Index(out, "\nHTTP server and API:"), strings.Index(out, "\nStorage:"), strings.Index(out, "\nLogging:"); i >= j || j >= k {
		t.Errorf("group order: web %d, storage %d, log %d", i, j, k)
	}
}

// TestConfigDocsUpToDate fails while docs/configuration.md differs from what
// the flag definitions generate.
func TestConfigDocsUpToDate(t *testing.T) {
	const path = "../../docs/configuration.md"
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; generate it with %s", err, docsCommand)
	}
	if want := configDocs(); string(got) != want {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(want, "\n")
		line := 0
		for line < len(gl) && line < len(wl) && gl[line] == wl[line] {
			line++
		}
		first := func(l []string) string {
			if line < len(l) {
				return l[line]
			}
			return "(end of file)"
		}
		t.Fatalf("docs/configuration.md is stale: regenerate it with %s\nfirst difference at line %d:\n  file:      %s\n  generated: %s",
			docsCommand, line+1, first(gl), first(wl))
	}
}

// TestConfigFileProcess runs the binary: a bad configuration file stops it
// at start-up with exit status 2 and the file and key on stderr; --help
// exits 0 with the grouped flags on stdout.
func TestConfigFileProcess(t *testing.T) {
	p := writeConfig(t, "storage:\n  retention:\n    time: abc\n")
	cmd := exec.Command(tandemBin, "--config.file="+p, "--storage.path="+t.TempDir(), "--web.listen-address=127.0.0.1:0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("tandem with a bad configuration file: %v, want exit status 2\n%s", err, stderr.String())
	}
	if want := `cfg.yml: storage.retention.time: invalid duration "abc"`; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q lacks %q", stderr.String(), want)
	}

	stdout.Reset()
	stderr.Reset()
	cmd = exec.Command(tandemBin, "--help")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tandem --help: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "\nRecording and alerting rules:\n") {
		t.Errorf("tandem --help output lacks the group headings:\n%s", stdout.String())
	}
}

func TestFlagVersionIgnoresOtherSettings(t *testing.T) {
	if c, err := parseFlags([]string{"--version", "--log.level=loud"}); err != nil || !c.showVersion {
		t.Errorf("--version --log.level=loud: %v", err)
	}
}

// TestConfigReloadRuleFiles changes rules.file in the configuration file of a
// running tandem: POST /-/reload reads the file again and loads the new rules.
func TestConfigReloadRuleFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a", "b"} {
		rules := "groups:\n  - name: group_" + name + "\n    rules:\n      - record: r_" + name + "\n        expr: vector(1)\n"
		if err := os.WriteFile(filepath.Join(dir, name+".yml"), []byte(rules), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "tandem.yml")
	write := func(rule string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte("rules:\n  file: ["+filepath.Join(dir, rule)+"]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	groups := func(p *tandemProc) []string {
		t.Helper()
		var d struct {
			Groups []struct {
				Name string `json:"name"`
			} `json:"groups"`
		}
		p.api(t, "/api/v1/rules", nil, false, &d)
		var out []string
		for _, g := range d.Groups {
			out = append(out, g.Name)
		}
		return out
	}
	write("a.yml")
	p := startTandem(t, filepath.Join(dir, "data"), "--config.file="+cfg, "--web.enable-lifecycle")
	if got := groups(p); len(got) != 1 || got[0] != "group_a" {
		t.Fatalf("rule groups at start %v, want [group_a]", got)
	}
	write("b.yml")
	resp, err := http.Post(p.url+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /-/reload: %s", resp.Status)
	}
	if got := groups(p); len(got) != 1 || got[0] != "group_b" {
		t.Fatalf("rule groups after the reload %v, want [group_b]", got)
	}
	// A broken configuration file fails the reload and keeps the rules.
	if err := os.WriteFile(cfg, []byte("rules: {file: 3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	resp, err = http.Post(p.url+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("POST /-/reload with a broken configuration: %s, want 500", resp.Status)
	}
	if got := groups(p); len(got) != 1 || got[0] != "group_b" {
		t.Errorf("rule groups after a failed reload %v, want [group_b]", got)
	}
}

// TestFlagMaxExemplars: --storage.exemplars.max is the deprecated name of
// --limits.max-exemplars, the default of every tenant's max_exemplars.
func TestFlagMaxExemplars(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 100000},
		{[]string{"--storage.exemplars.max=7"}, 7},
		{[]string{"--limits.max-exemplars=9"}, 9},
		{[]string{"--storage.exemplars.max=0"}, 0},
	} {
		c, err := parseFlags(tc.args)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := c.tenancy.defaults.MaxExemplars; got != tc.want {
			t.Errorf("%v: max_exemplars default %d, want %d", tc.args, got, tc.want)
		}
	}
	if _, err := parseFlags([]string{"--limits.max-exemplars=-1"}); err == nil || !strings.Contains(err.Error(), "max_exemplars") {
		t.Errorf("--limits.max-exemplars=-1: %v, want an error naming max_exemplars", err)
	}
}

package main

// The configuration file (--config.file), the grouped --help and the
// generated configuration reference (docs/configuration.md). All three work
// from the FlagSet of newFlagSet, so a new flag needs no code here.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// docsCommand regenerates docs/configuration.md.
const docsCommand = "make docs (or: go run ./cmd/tandem docs config > docs/configuration.md)"

// notInFile are the flags the configuration file cannot set.
var notInFile = map[string]bool{"config.file": true, "version": true}

// flagGroups are the groups of flags (by the first component of the flag
// name) in --help and the docs, in this order, with their headings. Groups
// not listed here come last, under their name.
var flagGroups = []struct{ name, title string }{
	{"config", "Configuration file"},
	{"web", "HTTP server and API"},
	{"storage", "Storage: data directory, WAL, blocks, retention, accepted samples"},
	{"head", "In-memory head"},
	{"group", "Groups: which series are stored together (the group key)"},
	{"ha", "HA pairs: deduplication of replicated senders"},
	{"remote-write", "Remote-write request limits"},
	{"tenant", "Tenants: who a request belongs to"},
	{"limits", "Per-tenant limits (defaults; --limits.file sets them per tenant)"},
	{"query", "PromQL queries"},
	{"rules", "Recording and alerting rules"},
	{"alertmanager", "Sending alerts to Alertmanager"},
	{"log", "Logging"},
	{"runtime", "Go runtime"},
	{"version", "Version"},
}

// exampleConfig is the example configuration file in docs/configuration.md
// (config_test.go loads it).
const exampleConfig = `# tandem.yml: start tandem with  tandem --config.file=tandem.yml
web:
  listen-address: ":9201"
  external-url: http://tandem.internal:9201/
storage:
  path: /var/lib/tandem
  retention:
    time: 30d
    size: 107374182400 # bytes (100 GiB)
  out-of-order-window: 1h
group:
  by: job,instance
rules:
  file:
    - /etc/tandem/rules/*.yml
  evaluation-interval: 30s
alertmanager:
  url:
    - http://127.0.0.1:9093
log:
  level: info
  format: json
`

// durationValue is a duration flag that accepts Go durations ("1h30m",
// "90s") and Prometheus durations ("15d", "1w"). It prints Prometheus's
// form ("15d") when that is exact.
type durationValue time.Duration

func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*durationValue)(p), name, usage)
}

// Set implements flag.Value.
func (d *durationValue) Set(s string) error {
	if v, err := time.ParseDuration(s); err == nil {
		*d = durationValue(v)
		return nil
	}
	v, err := model.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q", s)
	}
	*d = durationValue(v)
	return nil
}

// String implements flag.Value.
func (d *durationValue) String() string {
	if d == nil {
		return "0s"
	}
	if v := time.Duration(*d); v%time.Millisecond != 0 {
		return v.String()
	}
	return model.Duration(*d).String()
}

// Get implements flag.Getter.
func (d *durationValue) Get() any { return time.Duration(*d) }

// Get implements flag.Getter.
func (l *stringList) Get() any { return []string(*l) }

// Flag kinds, from the values' Get.
const (
	kindBool     = "boolean"
	kindInt      = "integer"
	kindFloat    = "number"
	kindDuration = "duration"
	kindString   = "string"
	kindList     = "list of strings"
)

func flagKind(f *flag.Flag) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return kindString
	}
	switch g.Get().(type) {
	case bool:
		return kindBool
	case int, int64, uint, uint64:
		return kindInt
	case float64:
		return kindFloat
	case time.Duration:
		return kindDuration
	case []string:
		return kindList
	}
	return kindString
}

// flagGroup is the group of a flag: the first component of its name.
func flagGroup(name string) string {
	g, _, _ := strings.Cut(name, ".")
	return g
}

type group struct {
	name, title string
	flags       []*flag.Flag
}

// groupFlags returns fs's flags by group, in flagGroups' order, each group's
// flags sorted by name.
func groupFlags(fs *flag.FlagSet) []group {
	byName := map[string]*group{}
	var out []*group
	for _, g := range flagGroups {
		byName[g.name] = &group{name: g.name, title: g.title}
		out = append(out, byName[g.name])
	}
	var extra []*group
	fs.VisitAll(func(f *flag.Flag) { // sorted by name
		n := flagGroup(f.Name)
		g := byName[n]
		if g == nil {
			g = &group{name: n, title: n}
			byName[n] = g
			extra = append(extra, g)
		}
		g.flags = append(g.flags, f)
	})
	slices.SortFunc(extra, func(a, b *group) int { return strings.Compare(a.name, b.name) })
	var res []group
	for _, g := range append(out, extra...) {
		if len(g.flags) > 0 {
			res = append(res, *g)
		}
	}
	return res
}

// loadConfigFile applies the configuration file at path to the flags of fs
// not set on the command line; the settings of the flags that are set there
// are only validated, on scratch (a second FlagSet of newFlagSet). It
// returns the names of the flags the file set.
func loadConfigFile(fs, scratch *flag.FlagSet, path string) (map[string]bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config.file: %w", err)
	}
	return applyConfig(fs, scratch, path, data)
}

// applyConfig applies the YAML configuration data (from the file name) to
// fs: keys are the flag names split at dots. Keys go in sorted order; all
// errors are reported, each with the file and key.
func applyConfig(fs, scratch *flag.FlagSet, name string, data []byte) (map[string]bool, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) { // empty file
			return nil, nil
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: want one YAML document, found more", name)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, nil
		}
		root = root.Content[0]
	}
	root = deref(root)
	if isNull(root) {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want a mapping of settings at the top level, got %s (line %d)", name, describe(root), root.Line)
	}

	type lineErr struct {
		line int
		err  error
	}
	var errs []lineErr
	keyErr := func(key string, n *yaml.Node, format string, args ...any) {
		errs = append(errs, lineErr{n.Line, fmt.Errorf("%s: %s: %s (line %d)", name, key, fmt.Sprintf(format, args...), n.Line)})
	}
	settings := map[string]*yaml.Node{}
	var walk func(prefix string, n *yaml.Node)
	walk = func(prefix string, n *yaml.Node) {
		n = deref(n)
		if isNull(n) { // an empty section
			return
		}
		if n.Kind != yaml.MappingNode {
			keyErr(prefix, n, "want a mapping of the keys %s, got %s", strings.Join(subKeys(fs, prefix), ", "), describe(n))
			return
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := deref(n.Content[i]), n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!null" {
				keyErr(strings.TrimPrefix(prefix+".<key>", "."), k, "want a string as key, got %s", describe(k))
				continue
			}
			key := k.Value
			if prefix != "" {
				key = prefix + "." + k.Value
			}
			switch {
			case seen[k.Value] || settings[key] != nil:
				keyErr(key, k, "set more than once")
			case notInFile[key]:
				keyErr(key, k, "cannot be set in the configuration file, only as the flag --%s", key)
			case fs.Lookup(key) != nil:
				settings[key] = v
			case isSection(fs, key):
				walk(key, v)
			default:
				where := "at the top level"
				if prefix != "" {
					where = "under " + prefix
				}
				keyErr(key, k, "unknown key; known keys %s: %s", where, strings.Join(subKeys(fs, prefix), ", "))
			}
			seen[k.Value] = true
		}
	}
	walk("", root)

	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fromFile := map[string]bool{}
	for _, key := range keys {
		n := deref(settings[key])
		f := fs.Lookup(key)
		values, err := yamlValues(f, n)
		if err != nil {
			keyErr(key, n, "%v", err)
			continue
		}
		target := fs
		if onCommandLine[key] { // the flag wins; only validate the file's setting
			target = scratch
		} else {
			fromFile[key] = true
		}
		if target == nil {
			continue
		}
		for _, v := range values {
			if err := target.Set(key, v); err != nil {
				if k := flagKind(f); k == kindInt || k == kindBool || k == kindFloat {
					err = fmt.Errorf("invalid %s %q: %w", k, v, err)
				}
				keyErr(key, n, "%v", err)
				break
			}
		}
	}
	if len(errs) > 0 { // in the file's order
		slices.SortStableFunc(errs, func(a, b lineErr) int { return a.line - b.line })
		joined := make([]error, len(errs))
		for i, e := range errs {
			joined[i] = e.err
		}
		return nil, errors.Join(joined...)
	}
	return fromFile, nil
}

// isSection reports whether key is a prefix of flag names (storage for storage.path).
func isSection(fs *flag.FlagSet, key string) bool {
	found := false
	fs.VisitAll(func(f *flag.Flag) { found = found || strings.HasPrefix(f.Name, key+".") })
	return found
}

// subKeys returns the keys directly under prefix ("" for the top level)
// that lead to flags settable in the file.
func subKeys(fs *flag.FlagSet, prefix string) []string {
	var out []string
	fs.VisitAll(func(f *flag.Flag) {
		if notInFile[f.Name] {
			return
		}
		rest := f.Name
		if prefix != "" {
			var ok bool
			if rest, ok = strings.CutPrefix(f.Name, prefix+"."); !ok {
				return
			}
		}
		k, _, _ := strings.Cut(rest, ".")
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	})
	slices.Sort(out)
	return out
}

// yamlValues checks the YAML value n against f's kind and returns the
// strings to Set (one per list item for repeatable flags).
func yamlValues(f *flag.Flag, n *yaml.Node) ([]string, error) {
	kind := flagKind(f)
	if kind == kindList {
		if n.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("want a list of strings (e.g. [a, b]), got %s", describe(n))
		}
		var out []string
		for i, it := range n.Content {
			it = deref(it)
			if it.Kind != yaml.ScalarNode || it.Tag != "!!str" {
				return nil, fmt.Errorf("item %d: want a string, got %s", i+1, describe(it))
			}
			out = append(out, it.Value)
		}
		return out, nil
	}
	var ok bool
	if n.Kind == yaml.ScalarNode {
		switch kind {
		case kindBool:
			ok = n.Tag == "!!bool"
		case kindInt:
			ok = n.Tag == "!!int"
		case kindFloat:
			ok = n.Tag == "!!float" || n.Tag == "!!int"
		case kindDuration:
			ok = n.Tag == "!!str" || n.Tag == "!!int"
		default:
			ok = n.Tag == "!!str"
		}
	}
	if !ok {
		article := "a "
		if kind == kindInt {
			article = "an "
		}
		hint := ""
		if kind == kindString && n.Kind == yaml.ScalarNode {
			hint = " (quote it)"
			if isNull(n) {
				hint = ` (write "" for an empty value)`
			}
		}
		return nil, fmt.Errorf("want %s%s, got %s%s", article, kind, describe(n), hint)
	}
	switch kind {
	case kindBool:
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, fmt.Errorf("invalid boolean %q", n.Value)
		}
		return []string{strconv.FormatBool(b)}, nil
	case kindInt:
		var i int64
		if err := n.Decode(&i); err != nil {
			return nil, fmt.Errorf("invalid integer %q", n.Value)
		}
		return []string{strconv.FormatInt(i, 10)}, nil
	}
	return []string{n.Value}, nil
}

func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// describe names the type of a YAML value for error messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "no value"
		case "!!bool":
			return fmt.Sprintf("the boolean %s", n.Value)
		case "!!int":
			return fmt.Sprintf("the integer %s", n.Value)
		case "!!float":
			return fmt.Sprintf("the number %s", n.Value)
		case "!!str":
			return fmt.Sprintf("the string %q", n.Value)
		}
		return fmt.Sprintf("%q (%s)", n.Value, n.Tag)
	}
	return "an unsupported YAML value"
}

// validateConfig checks what parsing a single flag cannot. Errors name the
// file for the settings from it (fromFile), the flag otherwise.
func validateConfig(c *config, fromFile map[string]bool) error {
	var errs []error
	check := func(name string, err error) {
		if err == nil {
			return
		}
		if fromFile[name] {
			errs = append(errs, fmt.Errorf("%s: %s: %w", c.configFile, name, err))
		} else {
			errs = append(errs, fmt.Errorf("--%s: %w", name, err))
		}
	}
	if c.maxConcurrentEvals < 0 {
		check("rules.max-concurrent-evals", fmt.Errorf("must not be negative, got %d", c.maxConcurrentEvals))
	}
	c.tenancy.validate(check)
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		check("log.level", fmt.Errorf("want debug, info, warn or error, got %q", c.logLevel))
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		check("log.format", fmt.Errorf("want text or json, got %q", c.logFormat))
	}
	validateSecurity(&c.security, check)
	return errors.Join(errs...)
}

// defaultText is f's default for --help and the docs ("" for none).
func defaultText(f *flag.Flag) string {
	switch flagKind(f) {
	case kindList:
		return ""
	case kindString:
		if f.DefValue == "" {
			return ""
		}
		return strconv.Quote(f.DefValue)
	case kindBool:
		if f.DefValue == "false" {
			return ""
		}
	}
	return f.DefValue
}

// writeUsage writes the --help text: the flags by group.
func writeUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `usage: tandem [flags]
       tandem tsdb inspect|verify [--storage.path=./data] [--groups]

tandem is a Prometheus-compatible remote storage: remote_write (1.0 and 2.0)
in, the Prometheus HTTP API (PromQL) and remote_read out.

Every flag but --config.file and --version can also be set in the YAML file
of --config.file, under its name split at dots (storage.retention.time is
storage: {retention: {time: 15d}}); flags on the command line override the
file. Durations take Go and Prometheus units (90s, 1h30m, 15d); byte sizes
are integers. Reference: docs/configuration.md.
`)
	for _, g := range groupFlags(fs) {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, f := range g.flags {
			kind := flagKind(f)
			line := "  --" + f.Name
			switch kind {
			case kindBool:
			case kindList:
				line += "=<string> (repeatable)"
			case kindInt:
				line += "=<int>"
			default:
				line += "=<" + kind + ">"
			}
			if d := defaultText(f); d != "" {
				line += "  default: " + d
			}
			fmt.Fprintln(w, line)
			wrap(w, f.Usage, "        ", 80)
		}
	}
}

// wrap writes text word-wrapped to width, each line indented.
func wrap(w io.Writer, text, indent string, width int) {
	line := indent
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > width {
			fmt.Fprintln(w, line)
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	if len(line) > len(indent) {
		fmt.Fprintln(w, line)
	}
}

// runDocs implements the hidden `tandem docs config`: it prints
// docs/configuration.md.
func runDocs(args []string, w io.Writer) error {
	if len(args) != 1 || args[0] != "config" {
		return errors.New("usage: tandem docs config > docs/configuration.md")
	}
	_, err := io.WriteString(w, configDocs())
	return err
}

// configDocs generates docs/configuration.md from the flag definitions.
func configDocs() string {
	fs := newFlagSet(&config{})
	var b strings.Builder
	fmt.Fprintf(&b, "<!-- Generated from the flag definitions in cmd/tandem by %s; do not edit. -->\n\n", docsCommand)
	var lists []string
	fs.VisitAll(func(f *flag.Flag) {
		if flagKind(f) == kindList && !notInFile[f.Name] {
			lists = append(lists, "`"+f.Name+"`")
		}
	})
	b.WriteString(`# Configuration reference

tandem is configured with command-line flags, a YAML configuration file, or
both. ` + "`tandem --help`" + ` lists the flags by group; this page lists them
with their configuration-file keys. To get tandem running and Grafana showing
data, see the [quick start](quickstart.md).

## The configuration file

` + "`--config.file=<path>`" + ` names a YAML file that can set every flag except
` + "`--config.file`" + ` and ` + "`--version`" + `:

- **Keys** are the flag names split at the dots: ` + "`--storage.retention.time=30d`" + `
  is ` + "`storage: {retention: {time: 30d}}`" + `, ` + "`--web.listen-address`" + ` is
  ` + "`web: {listen-address: ...}`" + `. (The YAML key column below writes the
  nesting with dots.)
- **Repeatable flags** (` + strings.Join(lists, ", ") + `) are lists:
  ` + "`rules: {file: [a.yml, b.yml]}`" + `.
- **Flags on the command line override the file**, key by key; for a
  repeatable flag, the flags replace the file's whole list.
- **Paths** in the file (` + "`storage.path`, `rules.file`" + `, ...) are relative to
  tandem's working directory, as on the command line (not to the file's
  directory, unlike Prometheus's ` + "`rule_files`" + `).
- **Durations** take Go's units (` + "`90s`, `1h30m`" + `) and Prometheus's
  (` + "`15d`, `1w`, `1y`" + `), in the file and in flags. **Byte sizes** are
  integers (bytes). **Booleans** are ` + "`true`/`false`" + `. **Strings** that YAML
  would read as something else (numbers, ` + "`true`" + `, empty) must be quoted.
- **Validation is strict**, at start-up: an unknown key, a value of the wrong
  type or an invalid value stops tandem (exit status 2) with an error naming
  the file and the key, e.g.
  ` + "`tandem: tandem.yml: storage.retention.time: invalid duration \"abc\" (line 4)`" + `.
  All errors of the file are reported at once.
- **Reloading**: ` + "`SIGHUP`" + ` and ` + "`POST /-/reload`" + ` (with
  ` + "`--web.enable-lifecycle`" + `) read the configuration
  file again and reload the rule files of its ` + "`rules.file`" + ` (flags still
  override it; the patterns are resolved again, so a glob picks up new files).
  A file that no longer parses fails the reload and the previous rules stay.
  Every other setting takes a restart.

### Example

` + "```yaml\n" + exampleConfig + "```" + `

The start-up log line ` + "`starting tandem`" + ` shows the version, the data
directory, the listen address, the group key labels and the configuration
file in effect.

## Settings
`)
	for _, g := range groupFlags(fs) {
		fmt.Fprintf(&b, "\n### %s\n\n", g.title)
		b.WriteString("| flag | YAML key | type | default | description |\n|---|---|---|---|---|\n")
		for _, f := range g.flags {
			key := "`" + f.Name + "`"
			if notInFile[f.Name] {
				key = "(flag only)"
			}
			def := defaultText(f)
			switch {
			case def != "":
				def = "`" + strings.Trim(def, `"`) + "`"
			case flagKind(f) == kindString:
				def = "`\"\"`"
			case flagKind(f) == kindBool:
				def = "`false`"
			}
			fmt.Fprintf(&b, "| `--%s` | %s | %s | %s | %s |\n", f.Name, key, flagKind(f), def, mdCell(f.Usage))
		}
	}
	return b.String()
}

// mdCell escapes text for a Markdown table cell.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}

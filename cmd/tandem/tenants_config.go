package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/tandem-tsdb/tandem/limits"
	"github.com/tandem-tsdb/tandem/tenant"
)

// The tenancy flags and the tenants' rule files.

// tenancyConfig are the tenancy and limits flags.
type tenancyConfig struct {
	header            string
	defaultID         string
	federation        bool
	maxTenants        int
	rulesDir          string
	limitsFile        string
	limitsReload      time.Duration
	rateLimitedStatus int
	defaults          limits.Limits
}

// addTenancyFlags defines the tenancy flags and the limits' defaults on fs.
func addTenancyFlags(fs *flag.FlagSet, c *tenancyConfig) {
	c.defaults = limits.Defaults()
	fs.StringVar(&c.header, "tenant.header", tenant.DefaultHeader, "Request header naming the tenant (the Cortex/Mimir/Thanos convention); requests without it belong to --tenant.default; empty ignores it, so everything is the default tenant's.")
	fs.StringVar(&c.defaultID, "tenant.default", tenant.DefaultID, "Tenant of requests that name none; its data is the data directory itself, the other tenants' are under <storage.path>/tenants/<id>.")
	fs.BoolVar(&c.federation, "tenant.federation", false, "Let queries name several tenants joined by | (tenant-a|tenant-b) and read all of them.")
	fs.IntVar(&c.maxTenants, "tenant.max-tenants", 1000, "Most tenants (each has its own storage); a write of a new tenant beyond it is refused (400); 0 = no limit.")
	fs.StringVar(&c.rulesDir, "rules.tenant-dir", "", "Directory of per-tenant rule files: <dir>/<tenant>/*.yml (and *.yaml) are evaluated over that tenant's data, their alerts sent with X-Scope-OrgID: <tenant>; reloaded with the other rule files. The default tenant's are --rules.file and <dir>/<default tenant>/.")
	fs.StringVar(&c.limitsFile, "limits.file", "", "YAML file of limits: defaults: {max_series: ...} over the --limits.* flags for all tenants, overrides: {<tenant>: {max_series: 100000, ...}} per tenant; read again every --limits.reload-interval, on SIGHUP and on /-/reload.")
	durationVar(fs, &c.limitsReload, "limits.reload-interval", 10*time.Second, "How often --limits.file is read again; 0 reads it only on SIGHUP and /-/reload.")
	fs.IntVar(&c.rateLimitedStatus, "limits.rate-limited-status", http.StatusTooManyRequests, "Status of writes over a tenant's ingestion rate: 429 (Prometheus drops them unless its queue_config sets retry_on_http_429) or 503 (Prometheus retries them).")
	addLimitFlags(fs, &c.defaults)
	// The label limits' names before they were per tenant.
	fs.IntVar(&c.defaults.MaxLabelsPerSeries, "remote-write.max-labels-per-series", c.defaults.MaxLabelsPerSeries, "Deprecated: use --limits.max-labels-per-series.")
	fs.IntVar(&c.defaults.MaxLabelNameLength, "remote-write.max-label-name-length", c.defaults.MaxLabelNameLength, "Deprecated: use --limits.max-label-name-length.")
	fs.IntVar(&c.defaults.MaxLabelValueLength, "remote-write.max-label-value-length", c.defaults.MaxLabelValueLength, "Deprecated: use --limits.max-label-value-length.")
	fs.IntVar(&c.defaults.MaxExemplars, "storage.exemplars.max", c.defaults.MaxExemplars, "Deprecated: use --limits.max-exemplars.")
}

// validate checks the tenancy flags.
func (c *tenancyConfig) validate(check func(name string, err error)) {
	if err := tenant.Validate(c.defaultID); err != nil {
		check("tenant.default", err)
	}
	if c.rateLimitedStatus != http.StatusTooManyRequests && c.rateLimitedStatus != http.StatusServiceUnavailable {
		check("limits.rate-limited-status", fmt.Errorf("want 429 or 503, got %d", c.rateLimitedStatus))
	}
	if c.maxTenants < 0 {
		check("tenant.max-tenants", fmt.Errorf("must not be negative, got %d", c.maxTenants))
	}
	if err := c.defaults.Validate(); err != nil {
		check("limits", err)
	}
}

// tenantRuleFiles are tenant id's rule file patterns: --rules.file for the
// default tenant, and <--rules.tenant-dir>/<id>/*.yml and *.yaml.
func tenantRuleFiles(c *config, id string) []string {
	var files []string
	if id == c.tenancy.defaultID {
		files = append(files, c.ruleFiles...)
	}
	if d := c.tenancy.rulesDir; d != "" {
		files = append(files, filepath.Join(d, id, "*.yml"), filepath.Join(d, id, "*.yaml"))
	}
	return files
}

// tenantsWithRules lists the tenants with a directory in --rules.tenant-dir:
// they are opened at start-up, so that their rules run before they write.
func tenantsWithRules(c *config) []string {
	if c.tenancy.rulesDir == "" {
		return nil
	}
	entries, _ := os.ReadDir(c.tenancy.rulesDir) // a missing directory holds no rules
	var ids []string
	for _, e := range entries {
		if e.IsDir() && tenant.Validate(e.Name()) == nil && e.Name() != c.tenancy.defaultID {
			ids = append(ids, e.Name())
		}
	}
	return ids
}

// reloadRules reloads the rule files of the tenants other than the
// default (whose rules runServer reloads).
func (ts *tenants) reloadRules() error {
	var errs []error
	ts.reg.Each(func(_ string, t *tenantStore) {
		if t.rules != nil {
			errs = append(errs, t.rules.Reload())
		}
	})
	return errors.Join(errs...)
}

// addLimitFlags defines --limits.<key> (underscores as dashes) for every
// limit of l, l's values being the defaults.
func addLimitFlags(fs *flag.FlagSet, l *limits.Limits) {
	limits.Fields(l, func(key, help string, p any) {
		name := "limits." + strings.ReplaceAll(key, "_", "-")
		switch p := p.(type) {
		case *int:
			fs.IntVar(p, name, *p, help)
		case *float64:
			fs.Float64Var(p, name, *p, help)
		case *model.Duration:
			fs.Var((*durationValue)(p), name, help)
		default:
			panic("no flag for the type of limit " + key)
		}
	})
}

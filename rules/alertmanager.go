package rules

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	commonconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/targetgroup"
)

// AlertmanagerClient is the HTTP client configuration shared by all Alertmanagers.
type AlertmanagerClient struct {
	// Timeout bounds one send of a batch of alerts (default 10s).
	Timeout time.Duration
	// BasicAuthUsername is the basic-auth user name; with BasicAuthPasswordFile it enables basic auth.
	BasicAuthUsername string
	// BasicAuthPasswordFile is the file holding the basic-auth password (re-read on every request).
	BasicAuthPasswordFile string
	// BearerTokenFile is the file holding a bearer token (re-read on every request); excludes basic auth.
	BearerTokenFile string
	// TLSCAFile is the CA certificate file used to verify the Alertmanagers' certificates.
	TLSCAFile string
	// TLSCertFile is the client certificate file for mutual TLS.
	TLSCertFile string
	// TLSKeyFile is the client key file for mutual TLS.
	TLSKeyFile string
	// TLSServerName overrides the server name checked in the Alertmanagers' certificates.
	TLSServerName string
	// TLSInsecureSkipVerify disables the verification of the Alertmanagers' certificates.
	TLSInsecureSkipVerify bool
	// Headers are sent with every request (X-Scope-OrgID for a tenant's alerts).
	Headers map[string]string
}

// HTTPClientConfig returns c as Prometheus's HTTP client configuration.
func (c AlertmanagerClient) HTTPClientConfig() (commonconfig.HTTPClientConfig, error) {
	hc := commonconfig.DefaultHTTPClientConfig
	if c.BasicAuthUsername != "" || c.BasicAuthPasswordFile != "" {
		if c.BasicAuthUsername == "" {
			return hc, errors.New("Alertmanager basic auth: a password file without a user name")
		}
		hc.BasicAuth = &commonconfig.BasicAuth{Username: c.BasicAuthUsername, PasswordFile: c.BasicAuthPasswordFile}
	}
	if c.BearerTokenFile != "" {
		hc.Authorization = &commonconfig.Authorization{Type: "Bearer", CredentialsFile: c.BearerTokenFile}
	}
	hc.TLSConfig = commonconfig.TLSConfig{
		CAFile:             c.TLSCAFile,
		CertFile:           c.TLSCertFile,
		KeyFile:            c.TLSKeyFile,
		ServerName:         c.TLSServerName,
		InsecureSkipVerify: c.TLSInsecureSkipVerify,
	}
	if len(c.Headers) > 0 {
		hc.HTTPHeaders = &commonconfig.Headers{Headers: map[string]commonconfig.Header{}}
		for k, v := range c.Headers {
			hc.HTTPHeaders.Headers[k] = commonconfig.Header{Values: []string{v}}
		}
	}
	if err := hc.Validate(); err != nil {
		return hc, fmt.Errorf("Alertmanager client: %w", err)
	}
	return hc, nil
}

// alertmanagerConfigs turns Alertmanager base URLs into one notifier
// configuration each (scheme and path prefix come from the URL) plus the
// static targets the notifier's discovery would have produced, keyed like
// config.AlertmanagerConfigs.ToMap.
func alertmanagerConfigs(rawURLs []string, c AlertmanagerClient) (config.AlertmanagerConfigs, map[string][]*targetgroup.Group, error) {
	hc, err := c.HTTPClientConfig()
	if err != nil {
		return nil, nil, err
	}
	var cfgs config.AlertmanagerConfigs
	targets := map[string][]*targetgroup.Group{}
	for i, raw := range rawURLs {
		u, err := parseAlertmanagerURL(raw)
		if err != nil {
			return nil, nil, err
		}
		tg := &targetgroup.Group{
			Targets: []model.LabelSet{{model.AddressLabel: model.LabelValue(u.Host)}},
			Source:  u.String(),
		}
		cfg := config.DefaultAlertmanagerConfig
		cfg.HTTPClientConfig = hc
		cfg.Scheme = u.Scheme
		cfg.PathPrefix = strings.TrimSuffix(u.Path, "/")
		cfg.Timeout = model.Duration(c.Timeout)
		cfg.APIVersion = config.AlertmanagerAPIVersionV2
		cfg.ServiceDiscoveryConfigs = discovery.Configs{discovery.StaticConfig{tg}}
		cfgs = append(cfgs, &cfg)
		targets[fmt.Sprintf("config-%d", i)] = []*targetgroup.Group{tg}
	}
	// The keys must be those the notifier derives from the configuration.
	for k := range cfgs.ToMap() {
		if _, ok := targets[k]; !ok {
			return nil, nil, fmt.Errorf("internal error: notifier configuration key %q has no targets", k)
		}
	}
	return cfgs, targets, nil
}

// parseAlertmanagerURL checks an Alertmanager base URL such as
// http://alertmanager:9093 or https://host/prefix.
func parseAlertmanagerURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("Alertmanager URL %q: %w", raw, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("Alertmanager URL %q: scheme must be http or https", raw)
	case u.Host == "":
		return nil, fmt.Errorf("Alertmanager URL %q: no host", raw)
	case u.User != nil:
		return nil, fmt.Errorf("Alertmanager URL %q: credentials belong in --alertmanager.basic-auth.* flags, not in the URL", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("Alertmanager URL %q: no query or fragment allowed", raw)
	}
	if err := config.CheckTargetAddress(model.LabelValue(u.Host)); err != nil {
		return nil, fmt.Errorf("Alertmanager URL %q: %w", raw, err)
	}
	return u, nil
}

// Package tenant names the tenants of a shared tandem and owns their
// storages.
//
// A request's tenant comes from a header, X-Scope-OrgID by default (the
// Cortex, Mimir and Thanos convention); a request without it belongs to the
// default tenant, so a single-tenant setup never sets it. Each tenant has a
// storage of its own, opened on its first write and kept in a directory of
// its own (Registry), so deleting a tenant or applying its retention touches
// no other tenant's data.
//
// Tenant IDs follow Cortex's rules: 1 to 150 bytes of letters, digits and
// ! - _ . * ' ( ), not "." or "..". A read may name several tenants joined
// by | (federation) when the operator allows it.
package tenant

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// DefaultHeader is the header a request names its tenant in.
const DefaultHeader = "X-Scope-OrgID"

// DefaultID is the tenant of requests that name none (Mimir's name for it).
const DefaultID = "anonymous"

// MaxIDLength is the longest tenant ID in bytes.
const MaxIDLength = 150

// ErrInvalid is wrapped by the errors of IDs that break the rules above.
var ErrInvalid = errors.New("invalid tenant ID")

// Validate checks one tenant ID.
func Validate(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty", ErrInvalid)
	case len(id) > MaxIDLength:
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalid, len(id), MaxIDLength)
	case id == "." || id == "..":
		return fmt.Errorf("%w: %q", ErrInvalid, id)
	}
	for i := 0; i < len(id); i++ {
		if !validByte(id[i]) {
			return fmt.Errorf("%w: %q holds %q; allowed are letters, digits and !-_.*'()", ErrInvalid, truncate(id), id[i])
		}
	}
	return nil
}

func validByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!-_.*'()", c) >= 0
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// Resolver finds the tenants of requests.
type Resolver struct {
	// Header is the header naming the tenant; "" ignores headers, so every
	// request belongs to Default (tenancy off).
	Header string
	// Default is the tenant of requests without the header.
	Default string
	// Federation lets reads name several tenants joined by |.
	Federation bool
}

// Single returns the one tenant r names (writes, and reads without
// federation).
func (s Resolver) Single(r *http.Request) (string, error) {
	v := s.value(r)
	if v == "" {
		return s.Default, nil
	}
	if strings.IndexByte(v, '|') >= 0 {
		return "", fmt.Errorf("%w: %s names several tenants (%q); only queries may, and only with --tenant.federation", ErrInvalid, s.Header, truncate(v))
	}
	if err := Validate(v); err != nil {
		return "", fmt.Errorf("%s: %w", s.Header, err)
	}
	return v, nil
}

// Read returns the tenants a read request names, sorted and without
// duplicates: one, or several with federation.
func (s Resolver) Read(r *http.Request) ([]string, error) {
	v := s.value(r)
	if v == "" {
		return []string{s.Default}, nil
	}
	if !s.Federation || strings.IndexByte(v, '|') < 0 {
		id, err := s.Single(r)
		if err != nil {
			return nil, err
		}
		return []string{id}, nil
	}
	ids := strings.Split(v, "|")
	for _, id := range ids {
		if err := Validate(id); err != nil {
			return nil, fmt.Errorf("%s: %w", s.Header, err)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

func (s Resolver) value(r *http.Request) string {
	if s.Header == "" {
		return ""
	}
	return strings.TrimSpace(r.Header.Get(s.Header))
}

type ctxKey struct{}

// NewContext returns ctx carrying the tenant id.
func NewContext(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext returns the tenant NewContext put in ctx.
func FromContext(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(ctxKey{}).(string)
	return id, ok
}

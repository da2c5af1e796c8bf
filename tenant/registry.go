package tenant

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Dir is the directory, under the data directory, of the tenants other than
// the default one; the default tenant's storage is the data directory
// itself, as before tenancy.
const Dir = "tenants"

// deletingPrefix marks a tenant directory being deleted: renamed first, so a
// crash midway leaves no half tenant, and removed again at the next open.
const deletingPrefix = ".deleting-"

// ErrTooMany is returned for a new tenant beyond Options.MaxTenants.
var ErrTooMany = errors.New("too many tenants")

// Options configures a Registry.
type Options[T any] struct {
	// Root is the data directory.
	Root string
	// Default is the default tenant, stored in Root itself.
	Default string
	// MaxTenants bounds the tenants (the default one included); 0 = no limit.
	MaxTenants int
	// Open opens the storage of tenant id in dir (created if missing).
	Open func(id, dir string) (T, error)
	// Close closes a tenant's storage.
	Close func(id string, t T) error
}

// Registry owns the tenants' storages: it opens each once, in its own
// directory, and closes them. It is safe for concurrent use.
type Registry[T any] struct {
	o      Options[T]
	mu     sync.RWMutex
	m      map[string]T
	openMu sync.Mutex // serializes opening and deleting
}

// NewRegistry returns a registry with no tenant open.
func NewRegistry[T any](o Options[T]) *Registry[T] {
	return &Registry[T]{o: o, m: map[string]T{}}
}

// DirOf is the directory of tenant id's storage.
func (r *Registry[T]) DirOf(id string) string {
	if id == r.o.Default {
		return r.o.Root
	}
	return filepath.Join(r.o.Root, Dir, id)
}

// OnDisk lists the tenants with a directory under Root/tenants, sorted,
// after removing what an interrupted Delete left.
func (r *Registry[T]) OnDisk() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(r.o.Root, Dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	var ids []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, deletingPrefix) {
			if err := os.RemoveAll(filepath.Join(r.o.Root, Dir, name)); err != nil {
				return nil, fmt.Errorf("finish deleting tenant directory %s: %w", name, err)
			}
			continue
		}
		if e.IsDir() && Validate(name) == nil && name != r.o.Default {
			ids = append(ids, name)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Get returns tenant id's storage if it is open.
func (r *Registry[T]) Get(id string) (T, bool) {
	r.mu.RLock()
	t, ok := r.m[id]
	r.mu.RUnlock()
	return t, ok
}

// Open returns tenant id's storage, opening (and creating) it if needed.
func (r *Registry[T]) Open(id string) (T, error) {
	if t, ok := r.Get(id); ok {
		return t, nil
	}
	r.openMu.Lock()
	defer r.openMu.Unlock()
	if t, ok := r.Get(id); ok {
		return t, nil
	}
	var zero T
	if err := Validate(id); err != nil {
		return zero, err
	}
	if n := r.Len(); r.o.MaxTenants > 0 && n >= r.o.MaxTenants {
		return zero, fmt.Errorf("%w: %d tenants, the limit (--tenant.max-tenants), refuse new tenant %q", ErrTooMany, n, id)
	}
	t, err := r.o.Open(id, r.DirOf(id))
	if err != nil {
		return zero, fmt.Errorf("open tenant %q: %w", id, err)
	}
	r.mu.Lock()
	r.m[id] = t
	r.mu.Unlock()
	return t, nil
}

// Len is the number of open tenants.
func (r *Registry[T]) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.m)
}

// IDs lists the open tenants, sorted.
func (r *Registry[T]) IDs() []string {
	r.mu.RLock()
	ids := make([]string, 0, len(r.m))
	for id := range r.m {
		ids = append(ids, id)
	}
	r.mu.RUnlock()
	slices.Sort(ids)
	return ids
}

// Each calls f for every open tenant, in ID order.
func (r *Registry[T]) Each(f func(id string, t T)) {
	for _, id := range r.IDs() {
		if t, ok := r.Get(id); ok {
			f(id, t)
		}
	}
}

// Delete closes tenant id's storage and removes its directory; the default
// tenant, stored in the data directory itself, cannot be deleted.
func (r *Registry[T]) Delete(id string) error {
	if id == r.o.Default {
		return fmt.Errorf("the default tenant %q cannot be deleted", id)
	}
	if err := Validate(id); err != nil {
		return err
	}
	r.openMu.Lock()
	defer r.openMu.Unlock()
	if t, ok := r.Get(id); ok {
		r.mu.Lock()
		delete(r.m, id)
		r.mu.Unlock()
		if err := r.o.Close(id, t); err != nil {
			return fmt.Errorf("close tenant %q: %w", id, err)
		}
	}
	dir := r.DirOf(id)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	tmp := filepath.Join(r.o.Root, Dir, deletingPrefix+id)
	if err := os.Rename(dir, tmp); err != nil {
		return fmt.Errorf("delete tenant %q: %w", id, err)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("delete tenant %q: %w", id, err)
	}
	return nil
}

// Close closes every open tenant's storage.
func (r *Registry[T]) Close() error {
	r.openMu.Lock()
	defer r.openMu.Unlock()
	r.mu.Lock()
	m := r.m
	r.m = map[string]T{}
	r.mu.Unlock()
	var errs []error
	for id, t := range m {
		if err := r.o.Close(id, t); err != nil {
			errs = append(errs, fmt.Errorf("close tenant %q: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

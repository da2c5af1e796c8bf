package tenant

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, ok := range []string{"a", "team-a", "Team_B.1", "x!*'()", strings.Repeat("x", MaxIDLength)} {
		if err := Validate(ok); err != nil {
			t.Errorf("Validate(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a b", "a|b", "ä", strings.Repeat("x", MaxIDLength+1), "a\x00"} {
		if err := Validate(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func request(v string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	if v != "" {
		r.Header.Set(DefaultHeader, v)
	}
	return r
}

func TestResolver(t *testing.T) {
	s := Resolver{Header: DefaultHeader, Default: DefaultID}
	for in, want := range map[string]string{"": DefaultID, "a": "a", " b ": "b"} {
		if got, err := s.Single(request(in)); err != nil || got != want {
			t.Errorf("Single(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := s.Single(request("a|b")); !errors.Is(err, ErrInvalid) {
		t.Errorf("Single(a|b) = %v", err)
	}
	if _, err := s.Read(request("a|b")); !errors.Is(err, ErrInvalid) {
		t.Errorf("Read(a|b) without federation = %v", err)
	}
	s.Federation = true
	if got, err := s.Read(request("b|a|b")); err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Read(b|a|b) = %v, %v", got, err)
	}
	if _, err := s.Read(request("a||b")); !errors.Is(err, ErrInvalid) {
		t.Errorf("Read(a||b) = %v", err)
	}
	if _, err := s.Single(request("a|b")); !errors.Is(err, ErrInvalid) {
		t.Errorf("Single(a|b) with federation = %v: writes name one tenant", err)
	}
	off := Resolver{Default: "d"}
	if got, err := off.Single(request("a")); err != nil || got != "d" {
		t.Errorf("tenancy off: Single = %q, %v", got, err)
	}
}

type store struct {
	id, dir string
	closed  atomic.Bool
}

func newTestRegistry(t *testing.T, max int, opens *atomic.Int64) *Registry[*store] {
	root := t.TempDir()
	return NewRegistry(Options[*store]{
		Root: root, Default: DefaultID, MaxTenants: max,
		Open: func(id, dir string) (*store, error) {
			opens.Add(1)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			return &store{id: id, dir: dir}, nil
		},
		Close: func(_ string, s *store) error { s.closed.Store(true); return nil },
	})
}

func TestRegistry(t *testing.T) {
	var opens atomic.Int64
	r := newTestRegistry(t, 3, &opens)
	def, err := r.Open(DefaultID)
	if err != nil || def.dir != r.o.Root {
		t.Fatalf("default tenant: %+v, %v; want its storage in the root", def, err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.Open("a"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if opens.Load() != 2 {
		t.Errorf("opened %d times, want 2 (default once, a once)", opens.Load())
	}
	a, _ := r.Get("a")
	if a.dir != filepath.Join(r.o.Root, Dir, "a") {
		t.Errorf("tenant a in %s", a.dir)
	}
	if _, err := r.Open("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Open("c"); !errors.Is(err, ErrTooMany) {
		t.Errorf("fourth tenant: %v, want ErrTooMany", err)
	}
	if _, err := r.Open("../x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid ID: %v", err)
	}
	if err := r.Delete(DefaultID); err == nil {
		t.Error("deleted the default tenant")
	}
	if err := r.Delete("a"); err != nil {
		t.Fatal(err)
	}
	if !a.closed.Load() {
		t.Error("deleted tenant not closed")
	}
	if _, err := os.Stat(a.dir); !os.IsNotExist(err) {
		t.Errorf("deleted tenant's directory: %v", err)
	}
	if _, ok := r.Get("a"); ok || !slices.Equal(r.IDs(), []string{DefaultID, "b"}) {
		t.Errorf("after delete: %v", r.IDs())
	}
	// What a crash during Delete leaves is removed; invalid names are not tenants.
	for _, d := range []string{deletingPrefix + "x", "not valid"} {
		if err := os.MkdirAll(filepath.Join(r.o.Root, Dir, d, "wal"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := r.OnDisk()
	if err != nil || !slices.Equal(ids, []string{"b"}) {
		t.Errorf("OnDisk = %v, %v", ids, err)
	}
	if _, err := os.Stat(filepath.Join(r.o.Root, Dir, deletingPrefix+"x")); !os.IsNotExist(err) {
		t.Errorf("interrupted delete left: %v", err)
	}
	b, _ := r.Get("b")
	if err := r.Close(); err != nil || !b.closed.Load() || !def.closed.Load() || r.Len() != 0 {
		t.Errorf("Close: %v", err)
	}
}

package limits

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"

	"github.com/tandem-tsdb/tandem/tsdb/head"
)

func TestOverridesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("overrides:\n  a:\n    max_series: 10\n    ingestion_rate: 2.5\n    max_query_length: 1d\n  b: {}\n")
	o, err := NewOverrides(Defaults(), path, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	a := o.For("a")
	if a.MaxSeries != 10 || a.IngestionRate != 2.5 || a.MaxQueryLength != model.Duration(24*time.Hour) || a.MaxLabelsPerSeries != 64 {
		t.Errorf("a = %+v: want its keys over the defaults", a)
	}
	if o.For("b") != Defaults() || o.For("zzz") != Defaults() {
		t.Errorf("b and unnamed tenants: %+v %+v", o.For("b"), o.For("zzz"))
	}
	changed := 0
	o.OnChange(func() { changed++ })
	for _, bad := range []string{
		"overrides:\n  a:\n    max_serie: 1\n",
		"overrides:\n  a:\n    max_series: -1\n",
		"overrides:\n  a:\n    max_series: lots\n",
		"overrides: [1]\n",
		"overides: {}\n",
	} {
		write(bad)
		err := o.Reload()
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%q: %v, want an error naming the file", bad, err)
		}
		if o.For("a").MaxSeries != 10 {
			t.Errorf("%q: limits changed after a failed reload", bad)
		}
	}
	write("overrides:\n  a:\n    max_series: 20\n")
	if err := o.Reload(); err != nil || o.For("a").MaxSeries != 20 || changed != 1 {
		t.Errorf("reload: %v, max_series %d, changes %d", err, o.For("a").MaxSeries, changed)
	}
	if err := o.Reload(); err != nil || changed != 1 {
		t.Errorf("unchanged file: %v, changes %d", err, changed)
	}
	// The defaults section applies to every tenant, under the tenants' entries.
	write("defaults:\n  max_series: 30\n  ingestion_rate: 5\noverrides:\n  a:\n    ingestion_rate: 7\n")
	if err := o.Reload(); err != nil || o.For("a").MaxSeries != 30 || o.For("a").IngestionRate != 7 || o.For("zzz").MaxSeries != 30 || o.Defaults().IngestionRate != 5 {
		t.Errorf("defaults section: %v, a %+v, zzz %+v", err, o.For("a"), o.For("zzz"))
	}
	write("defaults:\n  max_serie: 1\n")
	if err := o.Reload(); err == nil || o.For("zzz").MaxSeries != 30 {
		t.Errorf("a bad defaults section: %v, %d", err, o.For("zzz").MaxSeries)
	}
	write("")
	if err := o.Reload(); err != nil || o.For("a") != Defaults() || o.For("zzz") != Defaults() {
		t.Errorf("empty file: %v, %+v", err, o.For("a"))
	}
	if _, err := NewOverrides(Defaults(), filepath.Join(t.TempDir(), "missing.yml"), nil, nil); err == nil {
		t.Error("a missing file loaded")
	}
}

func TestKeysAndMap(t *testing.T) {
	m := Defaults().Map()
	for _, k := range Keys() {
		if _, ok := m[k]; !ok {
			t.Errorf("key %s missing from Map", k)
		}
	}
	if m["max_series"] != "5000000" || m["max_query_length"] != "0s" {
		t.Errorf("Map = %v", m)
	}
}

func TestBucket(t *testing.T) {
	var b Bucket
	now := time.Unix(1000, 0)
	if ok, _ := b.Take(1e9, now); !ok {
		t.Fatal("an unset bucket refused")
	}
	b.Set(100, 200, now)
	if ok, _ := b.Take(150, now); !ok {
		t.Fatal("within the burst: refused")
	}
	ok, wait := b.Take(100, now) // 50 left
	if ok || wait < 500*time.Millisecond || wait > 510*time.Millisecond {
		t.Fatalf("50 tokens for 100: ok %v, wait %v; want refused for 0.5 s", ok, wait)
	}
	if ok, _ := b.Take(100, now.Add(500*time.Millisecond)); !ok {
		t.Fatal("refused after the refill")
	}
	// Larger than the burst: admitted once the bucket is full, then in debt.
	if ok, _ := b.Take(500, now.Add(2*time.Second)); ok {
		t.Fatal("a large write admitted before the bucket is full")
	}
	if ok, _ := b.Take(500, now.Add(3*time.Second)); !ok {
		t.Fatal("a large write refused with the bucket full")
	}
	if ok, wait := b.Take(1, now.Add(3*time.Second)); ok || wait < 3*time.Second {
		t.Fatalf("after the large write: ok %v, wait %v; want 3 s of debt", ok, wait)
	}
	b.Set(0, 0, now.Add(6*time.Second))
	if ok, _ := b.Take(1e9, now.Add(6*time.Second)); !ok {
		t.Error("rate 0 refused")
	}
	if Retry(10*time.Millisecond) != 1 || Retry(2500*time.Millisecond) != 3 {
		t.Errorf("Retry: %d %d", Retry(10*time.Millisecond), Retry(2500*time.Millisecond))
	}
}

func TestMaxExemplars(t *testing.T) {
	if got, want := Defaults().MaxExemplars, head.DefaultOptions().MaxExemplars; got != want {
		t.Errorf("default max_exemplars %d, want the head's default %d", got, want)
	}
	_, got, err := parse([]byte("overrides:\n  a:\n    max_exemplars: 0\n  b:\n    max_exemplars: 7\n"), Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if got["a"].MaxExemplars != 0 || got["b"].MaxExemplars != 7 || got["b"].MaxSeries != Defaults().MaxSeries {
		t.Errorf("overrides: a %d, b %d", got["a"].MaxExemplars, got["b"].MaxExemplars)
	}
	if _, _, err := parse([]byte("overrides:\n  a:\n    max_exemplars: -1\n"), Defaults()); err == nil || !strings.Contains(err.Error(), "max_exemplars") {
		t.Errorf("a negative max_exemplars: %v", err)
	}
}

package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
)

func TestConcurrencyLimiter(t *testing.T) {
	l := newConcurrencyLimiter(1)
	if l.GetMaxConcurrent() != 1 {
		t.Fatalf("max = %d", l.GetMaxConcurrent())
	}
	if _, err := l.Insert(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := l.Insert(ctx, "b")
	if !errors.As(err, new(promql.ErrQueryTimeout)) {
		t.Fatalf("second insert while full: %v, want ErrQueryTimeout", err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if _, err := l.Insert(cctx, "c"); !errors.As(err, new(promql.ErrQueryCanceled)) {
		t.Fatalf("canceled insert: %v, want ErrQueryCanceled", err)
	}
	l.Delete(0)
	if _, err := l.Insert(context.Background(), "d"); err != nil {
		t.Fatalf("insert after delete: %v", err)
	}
}

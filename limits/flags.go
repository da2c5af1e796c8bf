package limits

import (
	"flag"
	"reflect"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// FlagPrefix is the prefix of the defaults' flags: --limits.max-series.
const FlagPrefix = "limits."

// FlagName is the flag of the limit with YAML key key.
func FlagName(key string) string { return FlagPrefix + strings.ReplaceAll(key, "_", "-") }

// RegisterFlags defines a flag on fs for every limit of l (l's values are
// the defaults), named by FlagName.
func RegisterFlags(fs *flag.FlagSet, l *Limits) {
	v := reflect.ValueOf(l).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		name, help := FlagName(key), f.Tag.Get("help")
		switch p := v.Field(i).Addr().Interface().(type) {
		case *int:
			fs.IntVar(p, name, *p, help)
		case *float64:
			fs.Float64Var(p, name, *p, help)
		case *model.Duration:
			fs.Var((*durationFlag)(p), name, help)
		default:
			panic("limits: no flag for the type of " + key)
		}
	}
}

// durationFlag is a model.Duration flag taking Go ("1h30m", "1.5h") and
// Prometheus ("15d") durations.
type durationFlag model.Duration

// Set implements flag.Value.
func (d *durationFlag) Set(s string) error {
	if v, err := time.ParseDuration(s); err == nil {
		*d = durationFlag(v)
		return nil
	}
	return (*model.Duration)(d).Set(s)
}

// String implements flag.Value: Prometheus's form when it is exact.
func (d *durationFlag) String() string {
	if d == nil {
		return "0s"
	}
	if v := time.Duration(*d); v%time.Millisecond != 0 {
		return v.String()
	}
	return model.Duration(*d).String()
}

// Get implements flag.Getter.
func (d *durationFlag) Get() any { return time.Duration(*d) }

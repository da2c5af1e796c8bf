package api

import (
	"math"
	"slices"
	"strconv"

	jsoniter "github.com/json-iterator/go"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	v1 "github.com/prometheus/prometheus/web/api/v1"
)

// jsonCodec writes the answers dashboards ask for most (float vectors and
// matrices, series lists) byte for byte as Prometheus's v1.JSONCodec does,
// appending to a reused buffer instead of walking the values by reflection,
// and hands every other response to v1.JSONCodec. An integral float below
// 2^53 is written as an integer: strconv's shortest form of such a float is
// its integer digits, and most gauges (bytes, counts) are integral.
type jsonCodec struct{ v1.JSONCodec }

// jsonEncoder is the codec's reused state: the output buffer, and the
// text of the timestamps last written at each point index (the series of a
// range query's answer share their steps).
type jsonEncoder struct {
	b  []byte
	ts []tsText
}

// tsText is a timestamp's encoding.
type tsText struct {
	t int64
	n uint8
	b [23]byte
}

// jsonEncoderFree keeps encoders across garbage collections (see
// freeList), enough for a dashboard's panels at once.
var jsonEncoderFree = &freeList[*jsonEncoder]{idle: make(chan *jsonEncoder, 32), build: func() *jsonEncoder { return new(jsonEncoder) }}

// Encode returns resp's JSON encoding.
func (c jsonCodec) Encode(resp *v1.Response) ([]byte, error) {
	e := jsonEncoderFree.get()
	own := e.b
	if largeAnswer(resp) {
		if b := idleBuffer(); b != nil {
			e.b = b // an earlier large answer's buffer (lend.go)
		}
	}
	ok := e.response(resp)
	b := e.b
	var out []byte
	switch {
	case !ok:
	case len(b) < lendMin:
		out = append(make([]byte, 0, len(b)), b...)
	default:
		out = b // no copy: lent, or given away when lend refuses it
	}
	switch {
	case len(out) >= lendMin:
		lend(out)
		e.b = own
	case cap(b) > lendMin:
		keepIdle(b) // a large buffer this answer did not need
		e.b = own
	default:
		e.b = b
	}
	if len(e.ts) <= 4096 {
		jsonEncoderFree.put(e)
	}
	if !ok {
		return c.JSONCodec.Encode(resp)
	}
	return out, nil
}

// response encodes resp into e.b; false if it holds anything but the
// values response writes itself.
func (e *jsonEncoder) response(resp *v1.Response) bool {
	if string(resp.Status) != "success" || resp.ErrorType != "" || resp.Error != "" {
		return false
	}
	b := append(e.b[:0], `{"status":"success"`...)
	defer func() { e.b = b }()
	var ok bool
	switch d := resp.Data.(type) {
	case nil:
		ok = true
	case *v1.QueryData:
		if d == nil || d.Stats != nil || d.Cost != nil {
			return false
		}
		switch r := d.Result.(type) {
		case promql.Matrix:
			b = append(b, `,"data":{"resultType":"matrix","result":`...)
			b, ok = e.appendMatrix(b, r)
		case promql.Vector:
			b = append(b, `,"data":{"resultType":"vector","result":`...)
			b, ok = appendVector(b, r)
		}
		b = append(b, '}')
	case []labels.Labels:
		b = append(b, `,"data":`...)
		b, ok = appendLabelsList(b, d)
	}
	if !ok {
		return false
	}
	for _, f := range [...]struct {
		name string
		list []string
	}{{`,"warnings":`, resp.Warnings}, {`,"infos":`, resp.Infos}} {
		if len(f.list) == 0 {
			continue
		}
		// Through jsoniter's own string encoder: struct fields escape HTML.
		enc, err := jsoniter.ConfigCompatibleWithStandardLibrary.Marshal(f.list)
		if err != nil {
			return false
		}
		b = append(append(b, f.name...), enc...)
	}
	b = append(b, '}')
	return true
}

func (e *jsonEncoder) appendMatrix(b []byte, m promql.Matrix) ([]byte, bool) {
	b = append(b, '[')
	begin, left, written := len(b), 0, 0 // points not yet written, and written
	for _, s := range m {
		left += len(s.Floats)
	}
	for i, s := range m {
		if i == 1 && written > 0 && left > 0 {
			// A large answer grows its buffer once, by what the first
			// series took per point, rather than by doubling.
			b = slices.Grow(b, (len(b)-begin)/written*left*9/8)
		}
		if len(s.Histograms) > 0 {
			return b, false
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"metric":`...)
		b = appendLabels(b, s.Metric)
		if len(s.Floats) > 0 {
			b = append(b, `,"values":[`...)
			if len(e.ts) < len(s.Floats) {
				e.ts = append(e.ts, make([]tsText, len(s.Floats)-len(e.ts))...)
			}
			// A value equal to the previous one (a constant gauge, a
			// counter at rest) copies its text.
			prevBits, prevStart, prevEnd := uint64(0), 0, 0
			for j, p := range s.Floats {
				if j > 0 {
					b = append(b, ',')
				}
				b = append(b, '[')
				if c := &e.ts[j]; c.n > 0 && c.t == p.T {
					b = append(b, c.b[:c.n]...)
				} else {
					start := len(b)
					b = appendTime(b, p.T)
					c.t, c.n = p.T, uint8(copy(c.b[:], b[start:]))
				}
				b = append(b, ',')
				start, bits := len(b), math.Float64bits(p.F)
				if j > 0 && bits == prevBits {
					b = append(b, b[prevStart:prevEnd]...)
				} else {
					b = appendFloat(b, p.F)
					prevBits = bits
				}
				prevStart, prevEnd = start, len(b)
				b = append(b, ']')
			}
			b = append(b, ']')
			left -= len(s.Floats)
			written += len(s.Floats)
		}
		b = append(b, '}')
	}
	return append(b, ']'), true
}

func appendVector(b []byte, v promql.Vector) ([]byte, bool) {
	b = append(b, '[')
	for i, s := range v {
		if s.H != nil {
			return b, false
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"metric":`...)
		b = appendLabels(b, s.Metric)
		b = append(b, `,"value":`...)
		b = appendPoint(b, s.T, s.F)
		b = append(b, '}')
	}
	return append(b, ']'), true
}

func appendLabelsList(b []byte, list []labels.Labels) ([]byte, bool) {
	if list == nil {
		return append(b, "null"...), true
	}
	b = append(b, '[')
	for i, ls := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendLabels(b, ls)
	}
	return append(b, ']'), true
}

// appendLabels writes ls as an object, as v1's labels encoder does.
func appendLabels(b []byte, ls labels.Labels) []byte {
	b = append(b, '{')
	first := true
	ls.Range(func(l labels.Label) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, l.Name)
		b = append(b, ':')
		b = appendString(b, l.Value)
	})
	return append(b, '}')
}

// appendString writes s quoted as jsoniter's Stream.WriteString does: bytes
// above 31 but '"' and '\\' as they are (UTF-8 or not), anything else
// through jsoniter itself.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 32 || c == '"' || c == '\\' {
			st := jsoniter.ConfigCompatibleWithStandardLibrary.BorrowStream(nil)
			st.WriteString(s)
			b = append(b, st.Buffer()...)
			jsoniter.ConfigCompatibleWithStandardLibrary.ReturnStream(st)
			return b
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendPoint writes [t,"f"] as v1's point encoders do.
func appendPoint(b []byte, t int64, f float64) []byte {
	b = append(b, '[')
	b = appendTime(b, t)
	b = append(b, ',')
	b = appendFloat(b, f)
	return append(b, ']')
}

// appendTime writes t, in milliseconds, as seconds with up to three decimals.
func appendTime(b []byte, t int64) []byte {
	if t < 0 {
		b = append(b, '-')
		t = -t
	}
	b = strconv.AppendInt(b, t/1000, 10)
	if frac := t % 1000; frac != 0 {
		b = append(b, '.')
		if frac < 100 {
			b = append(b, '0')
		}
		if frac < 10 {
			b = append(b, '0')
		}
		b = strconv.AppendInt(b, frac, 10)
	}
	return b
}

// appendFloat writes f quoted, in strconv's shortest form ('e' below 1e-6
// and from 1e21 on).
func appendFloat(b []byte, f float64) []byte {
	b = append(b, '"')
	if i := int64(f); float64(i) == f && i > -1<<53 && i < 1<<53 && (i != 0 || !math.Signbit(f)) {
		b = strconv.AppendInt(b, i, 10)
	} else {
		format := byte('f')
		if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
			format = 'e'
		}
		b = strconv.AppendFloat(b, f, format, -1, 64)
	}
	return append(b, '"')
}

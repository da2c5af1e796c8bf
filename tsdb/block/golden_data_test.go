package block

import (
	"github.com/prometheus/prometheus/model/labels"
)

// v4Groups is the content of testdata/v4: float groups that version 4 of the
// writer made with ChunkRows 128: v2Groups (constant, stepped decimal, XOR
// with a bitmap gap), and a group with a noisy two-decimal gauge (Rice-coded
// residuals), a member present in a run of rows only and an unaligned member
// whose samples sit 7 ms after the shared rows.
func v4Groups() []Group {
	gs := v2Groups()
	ts := make([]int64, 400)
	for i := range ts {
		ts[i] = 1_700_000_000_000 + int64(i)*15000
	}
	x := uint64(0x9e3779b97f4a7c15)
	noise := func() int64 { // xorshift: noise around a level, deterministic
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if x%20 == 0 { // a spike now and then: fixed-width fields pay for it on every value
			return int64(x>>8%2001) - 1000
		}
		return int64(x>>8%11) - 5
	}
	gauge := Column{Member: 0}
	run := Column{Member: 1}
	for i := range ts {
		gauge.Rows = append(gauge.Rows, int32(i))
		gauge.Values = append(gauge.Values, float64(500000+noise())/100)
		if i >= 150 && i < 260 {
			run.Rows = append(run.Rows, int32(i))
			run.Values = append(run.Values, float64(i*3))
		}
	}
	var uts []int64
	late := Column{Member: 2}
	for i := 0; i < len(ts); i += 9 {
		uts = append(uts, ts[i]+7)
		late.Rows = append(late.Rows, int32(len(uts)-1))
		late.Values = append(late.Values, 0.1*float64(i))
	}
	g3 := Group{
		Key: `instance="c",job="mixed"`,
		Members: []labels.Labels{
			labels.FromStrings("__name__", "gauge_noisy", "instance", "c", "job", "mixed"),
			labels.FromStrings("__name__", "run_only", "instance", "c", "job", "mixed"),
			labels.FromStrings("__name__", "late", "instance", "c", "job", "mixed"),
		},
		Tables: []Table{
			{Timestamps: ts, Columns: []Column{gauge, run}},
			{Timestamps: uts, Columns: []Column{late}},
		},
	}
	return append(gs, g3)
}

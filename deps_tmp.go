package main

import (
	_ "github.com/gogo/protobuf/proto"
	_ "github.com/golang/snappy"
	_ "github.com/oklog/run"
	_ "github.com/prometheus/client_golang/exp/api/remote"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/prometheus/prompb"
	_ "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	_ "github.com/prometheus/prometheus/promql"
	_ "github.com/prometheus/prometheus/promql/promqltest"
	_ "github.com/prometheus/prometheus/storage/remote"
	_ "github.com/prometheus/prometheus/tsdb"
	_ "github.com/prometheus/prometheus/web/api/v1"
)

func main() {}

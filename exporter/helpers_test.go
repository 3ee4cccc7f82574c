package exporter

import (
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
)

func limit(b int64) *int64 { return &b }

// t0 is the moment the tests of package exporter start at.
var t0 = time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)

// volumes builds one pod per volume name; a name in limits gets that sizeLimit.
var volumes = exportertest.PodPerVolume

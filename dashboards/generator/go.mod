module github.com/emptydir-guard/emptydir-guard/dashboards/generator

go 1.26.0

require (
	github.com/emptydir-guard/emptydir-guard v0.0.0
	github.com/google/go-jsonnet v0.22.0
	github.com/grafana/grafana-foundation-sdk/go v0.0.22
	github.com/prometheus/prometheus v0.315.1
	sigs.k8s.io/yaml v1.6.0
)

require github.com/pandatix/go-abnf v0.5.5 // indirect

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dennwc/varint v1.0.0 // indirect
	github.com/grafana/regexp v0.0.0-20250905093917-f7b3be9d1853 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.74.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	go.yaml.in/yaml/v2 v2.4.5 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/emptydir-guard/emptydir-guard => ../..

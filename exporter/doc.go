// Package exporter measures the emptyDir volumes of the pods on one node and publishes them
// as Prometheus metrics, and serves live measurements on request. It is the wiring: Run
// (the collection cycle), the pod informer, the snapshot, the collectors and LiveHandler; the
// periodic walks are package walk's engine, and the other concerns are packages below it, none
// of which imports it. docs/architecture.md maps them.
package exporter

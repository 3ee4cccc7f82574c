// Package exporter measures the emptyDir volumes of the pods on one node and publishes them
// as Prometheus metrics, and serves live measurements on request. It is the wiring: Run
// (the collection cycle), the pod informer, the walks a cycle runs, the collectors and
// LiveHandler; the concerns it draws on are packages below it, none of which imports it.
// docs/exporter.md, "Where the code lives", follows one cycle through the files.
package exporter

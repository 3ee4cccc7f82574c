// Package volume holds what every part of the exporter shares of one node's pods: what is
// measured (Volume, PodVolumes, the Kind of part and its Part label, the pod's PodStorage),
// what a measurement found (Measurement, VolumeResult, MeasureError and its Reason labels)
// and what measures (Source, VolumeSource, LiveVolumeSource).
//
// It is the leaf of the exporter: it imports no package of the exporter, and how a pod's
// spec becomes its PodVolumes (package exporter) and how a
// volume is measured (the sources) live elsewhere.
package volume

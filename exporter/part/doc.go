// Package part is the exporter's model of one node's pods: the storage parts it measures (Part:
// an emptyDir, a writable layer, a container's logs; Pod, its Kind and label, the pod's
// PodStorage), what a measurement found (Measurement, Result, MeasureError and its Reason
// labels) and what measures (Source, Measurer, LiveMeasurer, charged through a Meter).
//
// It is the leaf of the exporter: it imports no package of the exporter; how a pod's spec
// becomes its Pod (package exporter) and how a part is measured (the sources) live elsewhere.
package part

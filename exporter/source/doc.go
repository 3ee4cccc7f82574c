// Package source measures: the two sources of the exporter's numbers, Filesystem (the kubelet's
// pod volume directories, walked by internal/fswalk or read from their project quotas, and the
// containers' writable layers and logs) and Kubelet (the kubelet's Summary API), and
// LayerLocator, which finds a container's writable layer under containerd (and the directories of its
// image VOLUMEs), CRI-O or Docker.
//
// A source measures what it is asked for and keeps no schedule: which volume is measured when
// is package exporter's (and the live measurement's) to decide.
package source

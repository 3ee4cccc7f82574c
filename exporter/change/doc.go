// Package change is the change signal: whether a pod's own processes may have grown its files
// since a moment, told without walking by a typed, comparable mark of its cgroup's write
// counters (Signal, Mark; Cgroup reads them through internal/podcgroup, Unavailable stands in
// where they cannot be read). Which walk a mark spares is for schedule.Due and package walk to
// decide (docs/change-signal.md).
package change

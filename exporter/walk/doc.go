// Package walk is the engine of the periodic walks: each collection cycle it asks
// schedule.Due which parts of the node's pods to walk, starts them on its slots within the
// CPU budget (budget.Bucket, and budget.Floor for overdue walks), reads the pods' change marks,
// keeps a record of each part (its schedule.State, last result and mark) and publishes the
// last completed result of every part. A live walk takes a part over from its periodic walk
// (BeginLive). Its series are built in metrics.go. Package exporter wires it (Engine.Cycle
// from Exporter.refresh); it imports no package that imports it.
package walk

// Package live admits the live measurements the exporter serves to the remediator: the queue
// that gives each caller, and each namespace through it, its turns (Queue), and the CPU
// budgets their walks draw on (Budgets). The handler that measures (Exporter.LiveHandler)
// is package exporter's.
package live

// Package budget is the CPU the exporter's walks may spend: the token bucket (Bucket) the
// periodic walks (Config.CPUBudget) and each live caller (package live) draw on, and the
// floor (Floor) that splits the periodic budget among namespaces for their overdue walks.
package budget

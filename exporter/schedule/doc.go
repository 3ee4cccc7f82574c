// Package schedule decides which parts of the node's pods a collection cycle walks, and in
// what order: Due ranks them (never measured, overdue, then by urgency: usage against the
// limit that guards them), puts last what the change signal vouches unchanged, and says how
// each may start under the CPU budget (on the bucket's credit, or on its namespace's part of
// budget.Floor).
//
// It decides and keeps nothing: the walks, their slots and their records are package walk's,
// which asks Due each cycle with the State it remembers of each part.
package schedule

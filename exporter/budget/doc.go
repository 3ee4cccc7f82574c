// Package budget is the CPU token bucket the exporter's walks draw on: the periodic walks'
// (Config.CPUBudget, with the floor walks' debt) and each live caller's (package live).
package budget

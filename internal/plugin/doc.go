// Package plugin holds what the kubectl-emptydir command does, so that its command files only
// bind flags: the options every subcommand shares (the user's kubeconfig, the output format,
// where the measurements come from), the printer of tables, JSON and YAML, and the errors that
// choose the exit code. The subcommands' own logic lives beside it (top, explain, and
// internal/recommend).
package plugin

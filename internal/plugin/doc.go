// Package plugin holds what the kubectl-emptydir command does, so that its command files only
// bind flags: the options the subcommands share (the user's kubeconfig, the output format,
// where the measurements come from) and the flags of each, the printer of tables and of
// kubectl's -o formats (cli-runtime's), and the errors that choose the exit code. The subcommands' own logic lives beside it (top, explain, and
// internal/recommend).
package plugin

// Command kubectl-emptydir is emptyDir guard's kubectl plugin: `kubectl emptydir top`,
// `explain` and `recommend` show emptyDir volumes, pods and containers against their
// local-storage limits, with the user's kubeconfig and RBAC (docs/kubectl-plugin.md).
package main

import "os"

func main() { os.Exit(run()) }

// Command emptydir-remediator receives Alertmanager webhooks about emptyDir volumes over their
// sizeLimit and evicts the pods through the Eviction API after a live re-check and policy.
// See docs/remediator.md.
package main

import "os"

func main() { os.Exit(run(os.Args[1:])) }

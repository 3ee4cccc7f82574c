// Package exporter measures the emptyDir volumes of the pods on one node and publishes them
// as Prometheus metrics, and serves live measurements on request. It is the wiring: the
// concerns it draws on are packages below it, none of which imports it: volume (the shared
// types), source (what measures), schedule (what is walked when), budget (the CPU bucket),
// change (the change signal) and live (the admission of live requests). The walk and every
// other system call live in internal/fswalk.
//
// One collection cycle (Run, every Config.Interval):
//
//  1. Exporter.refresh lists the node's pods from the PodLister (pods.go, the informer).
//  2. With a volume.VolumeSource (source.Filesystem), volumeWalks.cycle (walks.go)
//     asks schedule.Due which volumes are due, most urgent first, and starts their
//     walks while a slot is free and the CPU budget (budget.Bucket, Config.CPUBudget) allows;
//     each walk calls MeasureVolume, which walks by fswalk.MeasureDiskUsage (or reads the
//     project quota) and charges its CPU to the budget through an fswalk.CPUMeter. The cycle
//     waits for the walks of volumes with a sizeLimit; the others run on in the background.
//     A whole-node volume.Source (source.Kubelet) is asked for every volume at once.
//  3. The cycle's snapshot (each volume's last good measurement) replaces the previous one;
//     Collect (collector.go) builds the metrics from it at scrape time.
//  4. nextCycle (align.go) plans the next start, aligned to a regular scraper's scrapes with
//     Config.AlignToScrapes.
//
// LiveHandler (livehandler.go) measures one pod's volumes at request time for the remediator,
// taking the place of their periodic walks (volumeWalks.beginLive).
package exporter

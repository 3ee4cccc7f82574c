// Package fswalk is the exporter's one door to the kernel: it measures a directory by walking it
// (du semantics, against a tenant that changes the tree during the walk), reads a directory's
// project quota, reports a filesystem's size, and meters the CPU time a walk's threads spend.
//
// Every system call, every unsafe pointer and every kernel structure of the exporter lives in
// this package's *_linux.go files; on other systems the same functions return an error
// wrapping errors.ErrUnsupported (*_other.go), so that everything above builds and tests on
// any OS. What may be added here: code that talks to the kernel about files and threads, with
// a stub for other systems. What may not: scheduling, Kubernetes types, metrics or HTTP;
// those belong to package exporter, which calls this one.
package fswalk

// Module canary requires a version of golang.org/x/text with a known vulnerability
// (GO-2021-0113). tools/vulncheck.sh fails unless govulncheck reports it: a run that
// finds nothing here is not reading its database.
module github.com/emptydir-guard/emptydir-guard/tools/vulncanary

go 1.26.0

require golang.org/x/text v0.3.5

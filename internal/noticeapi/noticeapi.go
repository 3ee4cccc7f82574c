// Package noticeapi is the contract of the remediator's notice endpoint, the one definition its
// client (the exporter, which posts a notice when a part of a pod first crosses its limit) and
// its server (the remediator) share. A notice names a pod part and nothing else: the remediator
// re-measures it live, as it does for an alert, so no number in it could decide anything.
package noticeapi

import (
	"fmt"
	"net/url"
)

// Path is where the remediator takes notices (POST, JSON body Notice).
const Path = "/notice"

// Audience is the audience of the exporter's ServiceAccount token that the remediator accepts
// on Path: a token projected for it is worth nothing to the API server or any other service.
const Audience = "emptydir-remediator"

// MaxBytes bounds a notice's body: a few names.
const MaxBytes = 4 << 10

// The limits a notice can be about, as the remediator's alerts spell them (label check).
const (
	CheckEmptyDir  = "emptydir"
	CheckPod       = "pod"
	CheckContainer = "container"
)

// Notice names one pod part that the exporter on Node measured over its limit: an emptyDir
// (Check CheckEmptyDir, Volume), the pod's ephemeral storage (CheckPod) or a container's
// (CheckContainer, Container).
type Notice struct {
	Node      string `json:"node"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	UID       string `json:"uid"`
	Check     string `json:"check"`
	Volume    string `json:"volume,omitempty"`
	Container string `json:"container,omitempty"`
}

// URL is the notice endpoint of the remediator whose base URL (scheme://host:port) is base.
func URL(base string) (*url.URL, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("remediator URL %q: %w", base, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("remediator URL %q: want http(s)://host[:port]", base)
	}
	return u.JoinPath(Path), nil
}

package exporter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// LivePath is the route of the live endpoint, in net/http ServeMux pattern syntax.
const LivePath = "GET /live/namespaces/{namespace}/pods/{pod}"

// liveTimeout bounds one live measurement: the remediator waits for it inline.
const liveTimeout = 30 * time.Second

// LiveResponse is the body of a successful live measurement (docs/metrics.md).
type LiveResponse struct {
	Node       string       `json:"node"`
	Namespace  string       `json:"namespace"`
	Pod        string       `json:"pod"`
	UID        string       `json:"uid"`
	Source     string       `json:"source"`
	MeasuredAt time.Time    `json:"measuredAt"`
	Volumes    []LiveVolume `json:"volumes"`
}

// LiveVolume is one volume of a LiveResponse.
type LiveVolume struct {
	Name              string    `json:"name"`
	Medium            string    `json:"medium"`
	UsedBytes         int64     `json:"usedBytes"`
	LimitBytes        *int64    `json:"limitBytes,omitempty"`
	CapacityBytes     int64     `json:"capacityBytes"`
	InodesUsed        int64     `json:"inodesUsed"`
	UnreadableEntries int64     `json:"unreadableEntries"`
	MeasuredAt        time.Time `json:"measuredAt"`
	CompletedAt       time.Time `json:"completedAt"`
}

type liveError struct {
	Error string `json:"error"`
}

// LiveHandler serves LivePath: it measures the named pod's volumes at request time,
// never from the collection snapshot, because the remediator must not act on stale
// numbers.
func (e *Exporter) LiveHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, body := e.live(r)
		e.liveRequests.WithLabelValues(strconv.Itoa(code)).Inc()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	})
}

func (e *Exporter) live(r *http.Request) (int, any) {
	ns, name := r.PathValue("namespace"), r.PathValue("pod")
	uid, volume := r.URL.Query().Get("uid"), r.URL.Query().Get("volume")
	if uid == "" {
		return http.StatusBadRequest, liveError{"query parameter uid is required: a live measurement must name the exact pod instance"}
	}
	if !e.cfg.Pods.HasSynced() {
		return http.StatusServiceUnavailable, liveError{"pod informer has not synced yet"}
	}
	pv, ok, err := e.cfg.Pods.Get(ns, name)
	if err != nil {
		return http.StatusServiceUnavailable, liveError{err.Error()}
	}
	if !ok {
		return http.StatusNotFound, liveError{fmt.Sprintf("pod %s/%s is not running on node %s with an emptyDir volume in use", ns, name, e.cfg.NodeName)}
	}
	if pv.UID != uid {
		return http.StatusNotFound, liveError{fmt.Sprintf("pod %s/%s has UID %s, not %s: it was recreated", ns, name, pv.UID, uid)}
	}
	if volume != "" {
		var only []Volume
		for _, v := range pv.Volumes {
			if v.Name == volume {
				only = append(only, v)
			}
		}
		if len(only) == 0 {
			return http.StatusNotFound, liveError{fmt.Sprintf("pod %s/%s has no emptyDir volume %q in use", ns, name, volume)}
		}
		pv.Volumes = only
	}

	ctx, cancel := context.WithTimeout(r.Context(), liveTimeout)
	defer cancel()
	select {
	case e.liveSlots <- struct{}{}:
		defer func() { <-e.liveSlots }()
	case <-ctx.Done():
		return http.StatusServiceUnavailable, liveError{"too many live measurements in progress"}
	}
	started := e.now()
	resp := LiveResponse{Node: e.cfg.NodeName, Namespace: ns, Pod: name, UID: uid,
		Source: e.cfg.Source.Name(), MeasuredAt: started}
	for _, res := range e.cfg.Source.Measure(ctx, []PodVolumes{pv}) {
		if res.Err != nil {
			e.measureErrors.WithLabelValues(e.cfg.Source.Name(), reasonOf(res.Err)).Inc()
			return http.StatusServiceUnavailable, liveError{fmt.Sprintf("measuring volume %q: %v", res.Volume.Name, res.Err)}
		}
		m := res.Measurement
		resp.Volumes = append(resp.Volumes, LiveVolume{
			Name: res.Volume.Name, Medium: res.Volume.Medium, UsedBytes: m.UsedBytes,
			LimitBytes: res.Volume.LimitBytes, CapacityBytes: m.CapacityBytes, InodesUsed: m.InodesUsed,
			UnreadableEntries: m.UnreadableEntries, MeasuredAt: m.MeasuredAt, CompletedAt: m.CompletedAt,
		})
	}
	e.log.Info("live measurement", "namespace", ns, "pod", name, "uid", uid, "volume", volume,
		"duration", e.now().Sub(started))
	return http.StatusOK, resp
}

package exporter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/emptydir-guard/emptydir-guard/exporter/live"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

// LiveTimeout bounds one live request, the wait for a measurement slot included: the
// remediator waits for it inline.
const LiveTimeout = 30 * time.Second

// liveRefusal is a liveapi.Error that tells the caller when to retry (Retry-After).
type liveRefusal struct {
	liveapi.Error
	retryAfter time.Duration
}

// LiveHandler serves liveapi.Pattern: it measures the named pod's volumes at request time,
// never from the collection snapshot, because the remediator must not act on stale
// numbers. Mount one handler per exporter: it holds the per-caller queue.
//
// Any pod that can reach the port may call it, so each caller (remote IP) gets one
// measurement at a time per pod, of at most all the global slots but one
// (Config.LiveConcurrency - 1) pods at once, of which one namespace's pods hold all but one,
// and a short queue; beyond that it gets 429, as when its CPU budgets (live.Budgets) hold less
// than the walk is expected to cost; a walk that exhausts one is cut, its answer a lower bound.
// The global bound keeps the node's I/O in check; as a single caller cannot hold every slot, it
// cannot starve the remediator, and one tenant's slow pods hold some of the remediator's turns,
// not all. Config.LiveMaxWait bounds the wait for both.
func (e *Exporter) LiveHandler() http.Handler {
	callers := live.NewQueue(e.cfg.LiveConcurrency - 1)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, body := e.live(r, callers, e.liveBudgets, e.cfg.LiveMaxWait)
		e.liveRequests.WithLabelValues(strconv.Itoa(code)).Inc()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if lr, ok := body.(liveRefusal); ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(lr.retryAfter.Seconds()))))
		}
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	})
}

// uidPattern is the form of the UIDs the API server assigns.
var uidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// checkLiveRequest rejects what cannot name a pod instance and its volume. Nothing of a
// request ever reaches a path: the directory is built from the informer's UID and the spec's
// volume name; this only keeps nonsense from the cache lookup and gives a clear reason.
func checkLiveRequest(r *http.Request) error {
	q := r.URL.Query()
	for _, k := range []string{liveapi.QueryUID, liveapi.QueryVolume} {
		if len(q[k]) > 1 {
			return fmt.Errorf("query parameter %s is given %d times: give it once", k, len(q[k]))
		}
	}
	ns, name := r.PathValue(liveapi.PathNamespace), r.PathValue(liveapi.PathPod)
	uid, volume := q.Get(liveapi.QueryUID), q.Get(liveapi.QueryVolume)
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return fmt.Errorf("namespace %q is not a valid namespace name: %s", ns, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return fmt.Errorf("pod %q is not a valid pod name: %s", name, strings.Join(msgs, "; "))
	}
	if uid == "" {
		return errors.New("query parameter uid is required: a live measurement must name the exact pod instance")
	}
	if !uidPattern.MatchString(uid) {
		return fmt.Errorf("uid %q is not a pod UID (lower-case 8-4-4-4-12 hex, as metadata.uid)", uid)
	}
	if volume != "" {
		if msgs := validation.IsDNS1123Label(volume); len(msgs) > 0 {
			return fmt.Errorf("volume %q is not a valid volume name: %s", volume, strings.Join(msgs, "; "))
		}
	}
	return nil
}

func (e *Exporter) live(r *http.Request, callers *live.Queue, budgets *live.Budgets, maxWait time.Duration) (int, any) {
	if err := checkLiveRequest(r); err != nil {
		return http.StatusBadRequest, liveapi.Error{Error: err.Error()}
	}
	ns, name := r.PathValue(liveapi.PathNamespace), r.PathValue(liveapi.PathPod)
	uid, volName := r.URL.Query().Get(liveapi.QueryUID), r.URL.Query().Get(liveapi.QueryVolume)
	if !e.cfg.Pods.HasSynced() {
		return http.StatusServiceUnavailable, liveapi.Error{Error: "pod informer has not synced yet"}
	}
	pv, ok, err := e.cfg.Pods.Get(ns, name)
	if err != nil {
		return http.StatusServiceUnavailable, liveapi.Error{Error: err.Error()}
	}
	if !ok {
		return http.StatusNotFound, liveapi.Error{Error: fmt.Sprintf("pod %s/%s is not on node %s, has no emptyDir volume in use there, or is in a namespace this exporter leaves out (--namespaces, --namespaces-denylist); for another node ask the exporter of the pod's node", ns, name, e.cfg.NodeName)}
	}
	if pv.UID != uid {
		return http.StatusNotFound, liveapi.Error{Error: fmt.Sprintf("pod %s/%s has UID %s, not %s: it was recreated", ns, name, pv.UID, uid)}
	}
	if volName != "" {
		var only []part.Part
		for _, v := range pv.Parts {
			if v.Name == volName {
				only = append(only, v)
			}
		}
		if len(only) == 0 {
			return http.StatusNotFound, liveapi.Error{Error: fmt.Sprintf("pod %s/%s has no emptyDir volume %q in use", ns, name, volName)}
		}
		pv.Parts = only
	}

	// The measurement, once started, runs to its end even if the caller hangs up, holding the
	// caller's turn and its slot until then, and its result is published: a live walk takes
	// the place of the volume's periodic walk, so a caller that asks and hangs up again and
	// again must not leave the volume unmeasured (nor start one walk per request).
	deadline := time.Now().Add(LiveTimeout) // the wait included
	waitCtx, cancelWait := context.WithTimeout(r.Context(), min(maxWait, LiveTimeout))
	defer cancelWait()
	caller := live.CallerOf(r)
	// The walk's context: cut (live.ErrCut) once the walk has exhausted a budget it draws on.
	walkCtx, cutWalk := context.WithCancelCause(context.WithoutCancel(r.Context()))
	estimate := e.liveEstimate(pv)
	walk, wait, scope := budgets.Of(caller, ns).Admit(estimate, func() { cutWalk(live.ErrCut) })
	if walk == nil {
		cutWalk(nil)
		e.liveRefusals.WithLabelValues(scope).Inc()
		held := fmt.Sprintf("its live measurements' CPU budget for namespace %s (%g of a core, %s at once)", ns, live.TenantShare, live.TenantBurst)
		if scope == live.ScopeCaller {
			held = fmt.Sprintf("its live measurements' CPU budget for all namespaces (%g of a core, %s at once)", live.CallerShare, live.CallerBurst)
		}
		spent := "has spent " + held
		if estimate > 0 {
			spent = fmt.Sprintf("has less than the %s this pod's last walks cost left in %s", estimate.Round(time.Millisecond), held)
		}
		return http.StatusTooManyRequests, liveRefusal{liveapi.Error{Error: fmt.Sprintf(
			"caller %s %s on node %s: retry in %s", caller, spent, e.cfg.NodeName, wait.Round(time.Second))}, wait}
	}
	abandon := func() { cutWalk(nil) }
	release, ok := callers.Acquire(waitCtx, caller, ns, uid)
	if !ok {
		abandon()
		return http.StatusTooManyRequests, liveRefusal{liveapi.Error{Error: fmt.Sprintf(
			"caller %s already has live measurements running on node %s: one at a time per pod, %d pods at a time per namespace, %d per caller",
			caller, e.cfg.NodeName, callers.PerTenant(), callers.PerCaller())},
			maxWait}
	}
	select {
	case e.liveSlots <- struct{}{}:
	case <-waitCtx.Done():
		release()
		abandon()
		return http.StatusServiceUnavailable, liveRefusal{liveapi.Error{Error: fmt.Sprintf(
			"too many live measurements in progress on node %s", e.cfg.NodeName)}, maxWait}
	}
	started := e.now()
	done := make(chan []part.Result, 1)
	go func() {
		defer release()
		defer func() { <-e.liveSlots }()
		defer abandon()
		ctx, cancel := context.WithDeadline(walkCtx, deadline)
		defer cancel()
		results := e.measureLive(ctx, pv, walk.Meter())
		for _, res := range results {
			if res.Err != nil {
				e.measureErrors.WithLabelValues(e.cfg.Source.Name(), part.ReasonOf(res.Err)).Inc()
			}
			e.noteQuotaExcess(res)
		}
		if cut, scope := walk.Cut(); cut {
			e.liveCuts.WithLabelValues(scope).Inc()
			e.log.Info("live walk cut: it exhausted the caller's live CPU budget; answering what it counted, a lower bound",
				"namespace", ns, "pod", name, "uid", uid, "caller", caller, "scope", scope, "cpu", walk.Meter().Spent())
		}
		e.log.Info("live measurement", "namespace", ns, "pod", name, "uid", uid, "volume", volName,
			"duration", e.now().Sub(started), "cpu", walk.Meter().Spent())
		done <- results
	}()
	var results []part.Result
	select {
	case results = <-done:
	case <-r.Context().Done():
		return http.StatusServiceUnavailable, liveapi.Error{Error: "the caller went away; the measurement goes on and is published"}
	}
	resp := liveapi.Response{Node: e.cfg.NodeName, Namespace: ns, Pod: name, UID: uid,
		Source: e.cfg.Source.Name(), MeasuredAt: started}
	for _, res := range results {
		if res.Err != nil {
			return http.StatusServiceUnavailable, liveapi.Error{Error: fmt.Sprintf("measuring %s: %v", res.Part.Describe(), res.Err)}
		}
		if res.Part.Kind != part.KindEmptyDir {
			continue // in EphemeralStorage
		}
		m := res.Measurement
		resp.Volumes = append(resp.Volumes, liveapi.Volume{
			Name: res.Part.Name, Medium: res.Part.Medium, UsedBytes: &m.UsedBytes,
			LimitBytes: res.Part.LimitBytes, CapacityBytes: m.CapacityBytes, InodesUsed: m.InodesUsed,
			UnreadableEntries: m.UnreadableEntries, ChangedDirectories: m.ChangedDirectories, CutShort: m.CutShort,
			LowerBound: m.LowerBound(), IncompleteSince: res.IncompleteSince, MeasuredAt: m.MeasuredAt, CompletedAt: m.CompletedAt,
		})
	}
	if volName == "" && pv.Storage != nil {
		resp.EphemeralStorage = e.liveStorage(pv, results)
	}
	return http.StatusOK, resp
}

// liveStorage adds up the pod's ephemeral storage from the live results of all its parts.
func (e *Exporter) liveStorage(pv part.Pod, results []part.Result) *liveapi.PodStorage {
	byName := make(map[string]part.Result, len(results))
	var completed time.Time
	for _, r := range results {
		byName[r.Part.Name] = r
		if r.Measurement.CompletedAt.After(completed) {
			completed = r.Measurement.CompletedAt
		}
	}
	u := storageUsage(pv, byName, e.cfg.DedicatedImageFilesystem, true)
	out := &liveapi.PodStorage{UsedBytes: u.UsedBytes, LimitBytes: u.LimitBytes, Parts: u.Parts, LowerBound: u.LowerBound,
		IncompleteSince: u.IncompleteSince, DedicatedImageFilesystem: e.cfg.DedicatedImageFilesystem, MeasuredAt: u.MeasuredAt, CompletedAt: completed,
		Containers: []liveapi.ContainerStorage{}}
	for _, c := range u.Containers {
		out.Containers = append(out.Containers, liveapi.ContainerStorage{Name: c.Name, UsedBytes: c.UsedBytes, LimitBytes: c.LimitBytes,
			WritableLayerBytes: c.WritableLayerBytes, LogsBytes: c.LogsBytes, WritableLayerUnlocated: c.Unlocated, LowerBound: c.LowerBound,
			IncompleteSince: c.IncompleteSince})
	}
	return out
}

// continueIncomplete sets the IncompleteSince of live results, of a source the collection does
// not walk volume by volume, from the runs of lower bounds the last cycle published.
func (e *Exporter) continueIncomplete(results []part.Result) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	for i, r := range results {
		if r.Err != nil {
			continue
		}
		var prev time.Time
		for _, p := range e.snap.volumes {
			if p.UID == r.UID && p.Part.Name == r.Part.Name {
				prev = p.IncompleteSince
			}
		}
		results[i].IncompleteSince = part.IncompleteSince(prev, r.Measurement)
	}
}

// measureLive measures the volumes of pv now. With per-volume walks, the live walk takes the
// place of their periodic walks (walk.Engine.BeginLive) and its results are published too, with
// what each part's walk cost, for the estimate of the next live walk; a part cut short by the
// caller's live CPU budget is answered only.
// Each result's IncompleteSince continues its volume's run of lower bounds: the pod's
// incompleteSince in the answer is the earliest of its parts'.
// Its walks' CPU goes to meter.
func (e *Exporter) measureLive(ctx context.Context, pv part.Pod, meter part.Meter) []part.Result {
	if e.walks == nil {
		results := e.cfg.Source.Measure(ctx, []part.Pod{pv})
		e.continueIncomplete(results)
		return results
	}
	keys := make([]part.Key, 0, len(pv.Parts))
	for _, v := range pv.Parts {
		keys = append(keys, part.Key{UID: pv.UID, Name: v.Name})
	}
	measure := e.walks.Source().MeasurePart
	if live, ok := e.walks.Source().(part.LiveMeasurer); ok {
		measure = live.MeasurePartLive
	}
	end := e.walks.BeginLive(keys)
	// One part after another (MeasureEach): each one's cost is what the meter gained meanwhile.
	costs := make(map[part.Key]time.Duration, len(keys))
	results := part.MeasureEach(ctx, []part.Pod{pv}, func(ctx context.Context, p part.Pod, v part.Part, _ part.Meter) (part.Measurement, error) {
		before := meter.Spent()
		defer func() { costs[part.Key{UID: p.UID, Name: v.Name}] = meter.Spent() - before }()
		return measure(ctx, p, v, meter)
	})
	end(results, costs, errors.Is(context.Cause(ctx), live.ErrCut))
	return results
}

// liveEstimate is what a live walk of pv's volumes is expected to cost: what their last walks
// cost (walk.Engine.LiveEstimate); 0 when not known, or the source is not walked volume by volume.
func (e *Exporter) liveEstimate(pv part.Pod) time.Duration {
	if e.walks == nil {
		return 0
	}
	keys := make([]part.Key, 0, len(pv.Parts))
	for _, v := range pv.Parts {
		keys = append(keys, part.Key{UID: pv.UID, Name: v.Name})
	}
	return e.walks.LiveEstimate(keys)
}

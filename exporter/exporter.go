package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/emptydir-guard/emptydir-guard/exporter/change"
	"github.com/emptydir-guard/emptydir-guard/exporter/live"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/walk"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
	"github.com/emptydir-guard/emptydir-guard/internal/logwatch"
	"github.com/emptydir-guard/emptydir-guard/internal/noticeapi"
)

// Config is what an Exporter measures and how. DefaultConfig gives the defaults, which the
// command's flags show and bind to; each setting names its flag, and Validate checks the
// settings as the command does. A setting left zero is not replaced by its default.
type Config struct {
	// NodeName is the value of the node label (--node.name).
	NodeName string
	// Source measures volumes, for the periodic collection and the live endpoint.
	Source part.Source
	// Pods tells which pods on the node have emptyDir volumes (and, with
	// PodWatcher.SetEphemeralStorage, the other parts of pods with an ephemeral-storage limit).
	Pods PodLister
	// DedicatedImageFilesystem says the runtime's writable layers are on another filesystem
	// than the kubelet's root dir (DedicatedImageFilesystem): they then count toward their
	// pod's ephemeral-storage limit only, not their container's, as in the kubelet.
	DedicatedImageFilesystem bool
	// MeasureEphemeralStorage says Pods lists the ephemeral-storage parts of pods with a limit
	// (--collection.ephemeral-storage): the exporter then publishes whether the node has a
	// dedicated image filesystem.
	MeasureEphemeralStorage bool
	// Publishes tells whether a scrape's filter exposes a family (metricfilter.Filter.Exposes);
	// the series of the others are not built. nil: every family is built. The filter still
	// decides what a scrape shows; this only spares building what it would drop.
	Publishes func(family string) bool
	// Logger receives one line per failed volume and per cycle at debug level; nil: none.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// Interval is how often Run starts a collection cycle (--collection.interval): every
	// volume with a sizeLimit (a Source that is no Measurer: every volume) is measured
	// once per cycle.
	Interval time.Duration
	// AlignToScrapes shifts the phase of the collection cycle so that a cycle ends just
	// before the scrapes of a regular scraper (--collection.align-to-scrapes; see
	// scrapeAligner); requests reach it through ScrapeHandler. Off, cycles keep the phase of
	// their start.
	AlignToScrapes bool
	// VolumeConcurrency bounds the volumes a Measurer measures at once in the collection
	// (--collection.concurrency). Above 1, one slow volume cannot hold up the others.
	VolumeConcurrency int
	// VolumeTimeout bounds one volume's measurement by a Measurer
	// (--collection.volume-timeout). It may exceed Interval: a walk outlives its cycle, and
	// the cycles publish the last completed result meanwhile.
	VolumeTimeout time.Duration
	// UnlimitedInterval is how often a Measurer's collection walks a volume without a
	// sizeLimit (--collection.unlimited-interval): it cannot trigger an eviction, so it needs
	// no more than the kubelet's own cadence. 0 walks it every cycle, with the others.
	UnlimitedInterval time.Duration
	// CPUBudget bounds the CPU of the process, as a share of one core, by deferring the
	// periodic walks of a Measurer (--collection.cpu-budget; the token bucket
	// budget.Bucket): what the process spends besides them (ProcessCPU) is taken from their
	// share first, but the live walks, which have budgets of their own per caller and
	// namespace. 0 means no bound.
	CPUBudget float64
	// ProcessCPU reads the CPU time the process has spent so far (DefaultConfig: getrusage).
	// nil: the budget counts the walks alone, on the threads that walk them (an exporter that
	// shares its process, as in tests and benchmarks of many exporters).
	ProcessCPU func() time.Duration
	// CPUBudgetCapacity is how much CPU time the budget saves up while the walks spend
	// less: what a burst of walks may take at once. 0 means CPUBudget's share of
	// UnlimitedInterval (at least of one minute), so that the slow cadence's walks can
	// run back to back; the command leaves it so.
	CPUBudgetCapacity time.Duration
	// ChangeSignal, when set, puts the walks of parts whose pod has written nothing since their
	// last complete walk began behind every other walk, on what the CPU budget has left, for at
	// most UnlimitedInterval (--collection.change-signal); nil: every part is due at its cadence.
	ChangeSignal change.Signal
	// SkipUnchanged: with ChangeSignal, such parts are not walked at all before UnlimitedInterval
	// (--collection.change-signal.skip-unchanged): cheaper on a node whose budget covers every
	// walk, where they would be walked each cycle, at the price of a wider window for what the
	// signal cannot see.
	SkipUnchanged bool
	// ChangeSignalRuntimeClasses are the RuntimeClasses, besides the node's default runtime
	// (pods without one), whose pods' writes their pod cgroup carries: runc-like runtimes, whose
	// containers' processes write the pod's files themselves
	// (--collection.change-signal.runtime-classes). A pod of any other RuntimeClass gets no
	// change mark (change.MarkRuntimeClass), so its parts are walked at their cadence: a sandbox
	// such as Kata with virtio-fs writes them from processes outside the pod's cgroup, whose
	// counters would then stay level however much it writes.
	ChangeSignalRuntimeClasses []string

	// OverLimit, when set, is told at the end of every cycle which parts are over their limits
	// (the notifier of --remediator.url): called on the cycle's goroutine, it must not block.
	OverLimit func(parts []noticeapi.Notice)
	// CrossedLimit, when set, is told of a part as soon as a walk finds it over its limit,
	// before the cycle ends (the notifier's Crossed); called on the walk's goroutine, it must
	// not block.
	CrossedLimit func(n noticeapi.Notice)
	// LogWatch, when set, is handed each cycle the log directories of the pods with a limit
	// (logwatch.Watcher), whose writes call MeasureLogsNow.
	LogWatch interface {
		Watch(dirs map[string]logwatch.Pod)
	}

	// LiveConcurrency bounds live measurements running at once (--live.concurrency).
	LiveConcurrency int
	// LiveMaxWait bounds how long a live request waits for its caller's turn and then for a
	// measurement slot (--live.max-wait); below LiveTimeout, which it is part of.
	LiveMaxWait time.Duration
}

// DefaultConfig returns the documented defaults: the one place they are written.
func DefaultConfig() Config {
	return Config{
		Interval:                10 * time.Second,
		AlignToScrapes:          true,
		MeasureEphemeralStorage: true,
		VolumeConcurrency:       2,
		VolumeTimeout:           time.Minute,
		UnlimitedInterval:       time.Minute,
		CPUBudget:               0.05,
		ProcessCPU:              processCPU(),
		LiveConcurrency:         4,
		// Well within LiveTimeout, so a request that got its turn late still has time to walk.
		LiveMaxWait: 10 * time.Second,
	}
}

// MaxCPUBudget bounds CPUBudget: the walks cannot use more cores than VolumeConcurrency
// (at most MaxVolumeConcurrency) × the walk concurrency of one volume (at most 64) allow.
const MaxCPUBudget = MaxVolumeConcurrency * 64

// MaxVolumeConcurrency bounds VolumeConcurrency.
const MaxVolumeConcurrency = 16

// Reasons a due walk was deferred to a later cycle (label reason of
// emptydir_exporter_walks_deferred_total).
const (
	// DeferredCPUBudget: the CPU budget had no credit left for it.
	DeferredCPUBudget = walk.DeferredCPUBudget
	// DeferredNoSlot: every walk slot stayed busy until the cycle ended.
	DeferredNoSlot = walk.DeferredNoSlot
)

// Validate reports every problem of the settings at once, naming their flags. The settings
// of the walks (VolumeConcurrency, VolumeTimeout, UnlimitedInterval, CPUBudget) are checked
// only with a Measurer, the only source that uses them; a Source with its own
// Validate method (source.Filesystem) is checked too.
func (c Config) Validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("--node.name (or NODE_NAME) is required: the exporter measures the pods of one node"))
	}
	if c.Interval < time.Second {
		errs = append(errs, fmt.Errorf("--collection.interval=%s is below 1s", c.Interval))
	}
	if c.LiveConcurrency < 1 {
		errs = append(errs, fmt.Errorf("--live.concurrency=%d must be at least 1", c.LiveConcurrency))
	}
	if c.LiveMaxWait <= 0 || c.LiveMaxWait >= LiveTimeout {
		errs = append(errs, fmt.Errorf("--live.max-wait=%s must be positive and below the live endpoint's %s timeout, which it is part of", c.LiveMaxWait, LiveTimeout))
	}
	if _, walks := c.Source.(part.Measurer); walks {
		if c.VolumeConcurrency < 1 || c.VolumeConcurrency > MaxVolumeConcurrency {
			errs = append(errs, fmt.Errorf("--collection.concurrency=%d must be between 1 and %d", c.VolumeConcurrency, MaxVolumeConcurrency))
		}
		if c.VolumeTimeout < time.Second {
			errs = append(errs, fmt.Errorf("--collection.volume-timeout=%s is below 1s", c.VolumeTimeout))
		}
		if c.UnlimitedInterval < c.Interval {
			errs = append(errs, fmt.Errorf("--collection.unlimited-interval=%s is below --collection.interval=%s: volumes without a sizeLimit are walked at most as often as those with one", c.UnlimitedInterval, c.Interval))
		}
		// The negated form also refuses NaN.
		if !(c.CPUBudget >= 0 && c.CPUBudget <= MaxCPUBudget) {
			errs = append(errs, fmt.Errorf("--collection.cpu-budget=%v must be between 0 (no budget) and %d (cores)", c.CPUBudget, MaxCPUBudget))
		}
	}
	if v, ok := c.Source.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Exporter keeps the result of the latest collection cycle and publishes it. It
// implements prometheus.Collector: metrics are built from the snapshot at scrape
// time, so a deleted pod's series vanish after the next cycle.
type Exporter struct {
	cfg Config
	now func() time.Time
	log *slog.Logger

	// hidden holds the Descs of the families Config.Publishes rejects: never built.
	hidden map[*prometheus.Desc]bool

	mu   sync.RWMutex
	snap snapshot

	// walks is set when the source measures volume by volume.
	walks *walk.Engine
	// liveBudgets bound the live walks' CPU, per caller and namespace; the periodic walks'
	// budget leaves what they spend out.
	liveBudgets *live.Budgets
	// aligner is set with Config.AlignToScrapes.
	aligner *scrapeAligner

	collections    *prometheus.CounterVec
	measureErrors  *prometheus.CounterVec
	uncheckedLinks prometheus.Counter
	watchErrors    prometheus.Counter
	liveRequests   *prometheus.CounterVec
	liveRefusals   *prometheus.CounterVec
	liveCuts       *prometheus.CounterVec
	liveSlots      chan struct{}
}

// snapshot is what one collection cycle produced.
type snapshot struct {
	volumes []part.Result // each with a measurement, fresh or the last good one
	storage []part.Pod    // the pods of the cycle whose ephemeral storage is measured
	// workloads are the pods of the cycle with their workloads (collectWorkloads).
	workloads []part.Pod
	// podIncompleteSince is, by pod UID, since when the pod's ephemeral-storage usage has been a
	// lower bound (pods of storage whose usage is one only).
	podIncompleteSince map[string]time.Time
	duration           time.Duration
	success            bool
	lastSuccess        time.Time
	pods               int
	volumeCount        int
	cycles             int
}

// sourceReasons lists the reasons each source can report.
var sourceReasons = map[string][]string{
	"filesystem": {part.ReasonNotFound, part.ReasonPermission, part.ReasonIO, part.ReasonTimeout},
	"kubelet":    {part.ReasonNotFound, part.ReasonKubeletUnreachable, part.ReasonKubeletError},
}

// New checks cfg and builds an Exporter.
func New(cfg Config) (*Exporter, error) {
	if cfg.Source == nil || cfg.Pods == nil {
		return nil, errors.New("exporter: Source and Pods are required")
	}
	// Zero is no default here (DefaultConfig holds them): it would block or never measure.
	if cfg.Interval <= 0 || cfg.LiveConcurrency < 1 || cfg.LiveMaxWait <= 0 || cfg.VolumeConcurrency < 1 || cfg.VolumeTimeout <= 0 {
		return nil, fmt.Errorf("exporter: Interval %s, LiveConcurrency %d, LiveMaxWait %s, VolumeConcurrency %d and VolumeTimeout %s must be positive: start from DefaultConfig",
			cfg.Interval, cfg.LiveConcurrency, cfg.LiveMaxWait, cfg.VolumeConcurrency, cfg.VolumeTimeout)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	constLabels := prometheus.Labels{"node": cfg.NodeName}
	e := &Exporter{
		cfg:         cfg,
		now:         now,
		log:         cfg.Logger,
		hidden:      hiddenFamilies(cfg.Publishes),
		liveBudgets: live.NewBudgets(now),
		collections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "emptydir_exporter_collections_total",
			Help:        "Collection cycles, by result.",
			ConstLabels: constLabels,
		}, []string{"result"}),
		measureErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "emptydir_exporter_measurement_errors_total",
			Help:        "Volumes that could not be measured, by source and reason.",
			ConstLabels: constLabels,
		}, []string{"source", "reason"}),
		uncheckedLinks: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "emptydir_exporter_unchecked_hard_links_total",
			Help:        "Hard links counted without a check for an inode already counted; usage may be over.",
			ConstLabels: constLabels,
		}),
		watchErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "emptydir_exporter_pod_watch_errors_total",
			Help:        "Failed pod list and watch requests to the API server, each retry counted.",
			ConstLabels: constLabels,
		}),
		liveRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "emptydir_exporter_live_requests_total",
			Help:        "Live measurement requests, by HTTP status code.",
			ConstLabels: constLabels,
		}, []string{"code"}),
		liveRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "emptydir_exporter_live_cpu_budget_refusals_total",
			Help:        "Live measurement requests refused (429) because a live CPU budget was spent, by scope.",
			ConstLabels: constLabels,
		}, []string{"scope"}),
		liveCuts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "emptydir_exporter_live_walks_cut_total",
			Help:        "Live walks cut short by the caller's live CPU budget, by scope.",
			ConstLabels: constLabels,
		}, []string{"scope"}),
		liveSlots: make(chan struct{}, cfg.LiveConcurrency),
	}
	// Series that exist at 0 before the first failure let rate() and increase()
	// see the first one, and keep dashboards from showing "no data" on a healthy node.
	for _, r := range sourceReasons[cfg.Source.Name()] {
		e.measureErrors.WithLabelValues(cfg.Source.Name(), r)
	}
	for _, code := range []int{http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		e.liveRequests.WithLabelValues(strconv.Itoa(code))
	}
	for _, scope := range []string{live.ScopeNamespace, live.ScopeCaller} {
		e.liveRefusals.WithLabelValues(scope)
		e.liveCuts.WithLabelValues(scope)
	}
	e.collections.WithLabelValues("success")
	e.collections.WithLabelValues("error")
	if cfg.AlignToScrapes {
		e.aligner = newScrapeAligner(cfg.Logger)
	}
	processCPU := cfg.ProcessCPU
	if processCPU != nil {
		// Live walks have budgets of their own: charged here too, a tenant going over its
		// limits again and again would defer the other namespaces' periodic walks.
		processCPU = func() time.Duration { return cfg.ProcessCPU() - e.liveBudgets.Spent() }
	}
	if vs, ok := cfg.Source.(part.Measurer); ok {
		e.walks = walk.New(walk.Config{
			Node: cfg.NodeName, Source: vs, Concurrency: cfg.VolumeConcurrency, Timeout: cfg.VolumeTimeout,
			UnlimitedInterval: cfg.UnlimitedInterval, CPUBudget: cfg.CPUBudget, CPUBudgetCapacity: cfg.CPUBudgetCapacity, ProcessCPU: processCPU,
			Signal: cfg.ChangeSignal, SkipUnchanged: cfg.SkipUnchanged, RuntimeClasses: cfg.ChangeSignalRuntimeClasses,
			Now: now, Logger: cfg.Logger, Done: e.walkEnded,
			PodNow: func(p part.Pod) (part.Pod, bool) {
				cur, ok, err := cfg.Pods.Get(p.Namespace, p.Pod)
				if err != nil {
					return p, true // judged by the cycle's list
				}
				return cur, ok
			},
		})
	}
	return e, nil
}

// Run refreshes the snapshot once the pod informer has synced (or one Config.Interval has
// passed) and then every interval until ctx ends, at the phase nextCycle plans. A cycle
// waits for its measurements at most one interval; a volume's walk may go on for up to
// Config.VolumeTimeout, and its result is published by a later cycle. Once ctx has ended,
// Run returns when every walk it started has ended.
func (e *Exporter) Run(ctx context.Context) {
	interval := e.cfg.Interval
	if e.walks != nil {
		defer e.walks.Wait()
	}
	// A started (or restarted) exporter's informer syncs within moments: a first cycle
	// before that would publish nothing, and the next one would come a whole interval later.
	// Past one interval, cycles run anyway, reporting that the pods are not known yet.
	syncCtx, cancelSync := context.WithTimeout(ctx, interval)
	_ = wait.PollUntilContextCancel(syncCtx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return e.cfg.Pods.HasSynced(), nil
	})
	cancelSync()
	next := time.NewTimer(0)
	defer next.Stop()
	// Planned, not actual, starts: a timer's lateness does not shift the phase.
	for planned := e.now(); ; {
		select {
		case <-ctx.Done():
			return
		case <-next.C:
		}
		cycleCtx, cancel := context.WithTimeout(ctx, interval)
		e.refresh(cycleCtx, ctx, interval/2)
		cancel()
		planned = e.nextCycle(planned, interval)
		next.Reset(max(0, planned.Sub(e.now())))
	}
}

// Refresh runs one collection cycle, waiting for its measurements until they end
// or ctx does, and replaces the snapshot. Walks it starts may outlive ctx, each
// bounded by Config.VolumeTimeout. A volume that fails, or whose walk is still
// running, keeps its last good measurement with its old time, so that
// emptydir_measurement_age_seconds shows it is not fresh.
func (e *Exporter) Refresh(ctx context.Context) { e.refresh(ctx, context.WithoutCancel(ctx), 0) }

// refresh is Refresh with walks started under walksCtx; a walk of a volume without a
// sizeLimit may come up to tolerance before UnlimitedInterval has passed.
func (e *Exporter) refresh(ctx, walksCtx context.Context, tolerance time.Duration) {
	start := e.now()
	success := true
	var pods []part.Pod
	if !e.cfg.Pods.HasSynced() {
		success = false
		e.log.Warn("pod informer has not synced yet; publishing no volumes")
	} else {
		var err error
		if pods, err = e.cfg.Pods.List(); err != nil {
			success = false
			e.log.Error("listing pods", "err", err)
		}
	}

	e.mu.RLock()
	lastGood := make(map[part.Key]part.Result, len(e.snap.volumes))
	for _, v := range e.snap.volumes {
		lastGood[part.Key{UID: v.UID, Name: v.Part.Name}] = v
	}
	prev := e.snap
	e.mu.RUnlock()

	e.watchLogs(pods)
	var results []part.Result
	if e.walks != nil {
		results = e.walks.Cycle(ctx, walksCtx, pods, tolerance) // each walk was counted as it ended
	} else {
		results = e.cfg.Source.Measure(ctx, pods)
		settling := map[string]part.Pod{}
		for _, p := range pods {
			if p.Settling {
				settling[p.UID] = p
			}
		}
		for i, r := range results {
			results[i].Err = part.AbsentWhileSettling(settling[r.UID], r.Err)
			e.noteMeasured(results[i])
		}
	}
	kept := make([]part.Result, 0, len(results))
	for _, r := range results {
		if r.Err == nil {
			if e.walks == nil { // the walks keep each volume's run of lower bounds themselves
				r.IncompleteSince = part.IncompleteSince(lastGood[part.Key{UID: r.UID, Name: r.Part.Name}].IncompleteSince, r.Measurement)
			}
			kept = append(kept, r)
			// Published as a lower bound, but the walk did not end: as a failure, the cycle
			// did not measure every volume.
			success = success && !r.Measurement.CutShort
			continue
		}
		if errors.Is(r.Err, part.ErrAbsent) {
			continue // nothing to publish, not even the last numbers: the directory is gone
		}
		if errors.Is(r.Err, walk.ErrAwaitingSlowWalk) {
			continue // not measured yet by design of the walk schedule
		}
		success = false
		if old, ok := lastGood[part.Key{UID: r.UID, Name: r.Part.Name}]; ok {
			old.Part = r.Part // the spec (limit) may have changed; the numbers have not been re-read
			kept = append(kept, old)
		}
	}

	var storage []part.Pod
	emptyDirs, podsWithEmptyDirs := 0, 0
	for _, p := range pods {
		if p.Storage != nil {
			storage = append(storage, p)
		}
		n := 0
		for _, v := range p.Parts {
			if v.Kind == part.KindEmptyDir {
				n++
			}
		}
		emptyDirs += n
		if n > 0 {
			podsWithEmptyDirs++
		}
	}
	next := snapshot{
		volumes:            kept,
		storage:            storage,
		workloads:          podWorkloads(pods),
		podIncompleteSince: e.podIncompleteSince(prev.podIncompleteSince, storage, kept, start),
		duration:           e.now().Sub(start),
		success:            success,
		lastSuccess:        prev.lastSuccess,
		pods:               podsWithEmptyDirs,
		volumeCount:        emptyDirs,
		cycles:             prev.cycles + 1,
	}
	if success {
		next.lastSuccess = e.now()
		e.collections.WithLabelValues("success").Inc()
	} else {
		e.collections.WithLabelValues("error").Inc()
	}
	e.mu.Lock()
	e.snap = next
	e.mu.Unlock()
	if e.cfg.OverLimit != nil {
		e.cfg.OverLimit(e.overLimitParts(next))
	}
	e.log.Debug("collection cycle done", "pods", next.pods, "volumes", next.volumeCount,
		"success", success, "duration", next.duration)
}

// podIncompleteSince is, for each pod of storage whose usage from volumes is a lower bound,
// since when it has been one: prev's time while it was one at the previous cycle too, else the
// start of the earliest incomplete measurement of its parts, or now when parts only lack one.
func (e *Exporter) podIncompleteSince(prev map[string]time.Time, storage []part.Pod, volumes []part.Result, now time.Time) map[string]time.Time {
	out := map[string]time.Time{}
	byPod := resultsByPod(volumes)
	for _, p := range storage {
		u := storageUsage(p, byPod[p.UID], e.cfg.DedicatedImageFilesystem, false)
		switch {
		case !u.LowerBound:
		case !prev[p.UID].IsZero():
			out[p.UID] = prev[p.UID]
		case !u.IncompleteSince.IsZero():
			out[p.UID] = u.IncompleteSince
		default:
			out[p.UID] = now
		}
	}
	return out
}

// walkEnded takes one walk's result as it ends, a periodic or a live one: its errors counted,
// and a limit it puts its pod over told at once.
func (e *Exporter) walkEnded(r part.Result) {
	e.noteMeasured(r)
	e.noticeEarly(r)
}

// noteMeasured counts and logs what one measurement found wrong: once per cycle
// for a Source, once per completed walk for a Measurer.
func (e *Exporter) noteMeasured(r part.Result) {
	if errors.Is(r.Err, part.ErrAbsent) {
		return
	}
	if r.Err == nil && r.Measurement.CutShort {
		// The walk timed out as before; what it counted is published as a lower bound.
		e.measureErrors.WithLabelValues(e.cfg.Source.Name(), part.ReasonTimeout).Inc()
		e.log.Warn("walk cut short by its deadline; publishing what it counted as a lower bound",
			"namespace", r.Namespace, "pod", r.Pod, "uid", r.UID, "volume", r.Part.Name,
			"used_bytes", r.Measurement.UsedBytes)
	}
	if r.Err == nil && r.Measurement.ChangedDirectories > 0 {
		e.log.Info("directories changed during the walk, even after a retry; usage is a lower bound",
			"namespace", r.Namespace, "pod", r.Pod, "uid", r.UID, "volume", r.Part.Name,
			"changed_directories", r.Measurement.ChangedDirectories, "used_bytes", r.Measurement.UsedBytes)
	}
	e.noteQuotaExcess(r)
	if r.Err == nil {
		if n := r.Measurement.UncheckedLinks; n > 0 {
			e.uncheckedLinks.Add(float64(n))
			e.log.Warn("volume has more hard-linked inodes than a walk remembers; usage may be over-counted",
				"namespace", r.Namespace, "pod", r.Pod, "uid", r.UID, "volume", r.Part.Name, "unchecked_links", n)
		}
		return
	}
	source := e.cfg.Source.Name()
	reason := part.ReasonOf(r.Err)
	e.measureErrors.WithLabelValues(source, reason).Inc()
	e.log.Warn("measuring volume", "namespace", r.Namespace, "pod", r.Pod, "uid", r.UID,
		"volume", r.Part.Name, "source", source, "reason", reason, "err", r.Err)
}

// noteQuotaExcess logs a volume whose project quota counted more than its walk found.
func (e *Exporter) noteQuotaExcess(r part.Result) {
	if n := r.Measurement.QuotaExcessBytes; r.Err == nil && n > 0 {
		e.log.Warn("the volume's project quota counts more than the volume holds: files elsewhere with its project ID, or deleted files held open; published from the walk",
			"namespace", r.Namespace, "pod", r.Pod, "uid", r.UID, "volume", r.Part.Name,
			"used_bytes", r.Measurement.UsedBytes, "quota_excess_bytes", n)
	}
}

// WatchErrorHandler counts failed list and watch requests of the pod informer; hand it
// to the PodWatcher's SetWatchErrorHandler.
func (e *Exporter) WatchErrorHandler(err error) {
	e.watchErrors.Inc()
	e.log.Warn("pod watch failed; serving pods from cache", "err", err)
}

// processCPU is the reader of the process's CPU time for DefaultConfig; nil where the
// system gives none (fswalk.ProcessCPU needs Linux).
func processCPU() func() time.Duration {
	if _, err := fswalk.ProcessCPU(); err != nil {
		return nil
	}
	return func() time.Duration {
		d, _ := fswalk.ProcessCPU() // getrusage(RUSAGE_SELF) cannot fail once it has worked
		return d
	}
}

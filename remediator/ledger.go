package remediator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
)

// Bounds of the ledger. Duplicate suppression needs some memory even when the cooldown and
// the cap window are both 0, and the stored copy must stay well under a ConfigMap's 1 MiB.
const (
	// MinLedgerHorizon is the shortest time an eviction is remembered for.
	MinLedgerHorizon = time.Hour
	// MaxLedgerEntries bounds the entries kept; the oldest go first.
	MaxLedgerEntries = 2000
)

// outcomeReserved marks an entry whose eviction was being attempted: it counts against the
// caps and the cooldown, because a replica that crashed after the Eviction API call could
// not record that it happened.
const outcomeReserved Outcome = "reserved"

// outcomeUnconfirmed marks an entry whose Eviction API call got no answer proving it did not
// happen (a timeout, a 5xx, a broken connection): it counts against the caps until the window
// ends. It is no duplicate and starts no cooldown, so that the retry of the same pod UID can
// see the pod gone or try again, in this same slot.
const outcomeUnconfirmed Outcome = "unconfirmed"

// ledgerEntry is one eviction (or dry-run eviction, or attempt) the remediator made.
type ledgerEntry struct {
	ID        string    `json:"id"`
	At        time.Time `json:"at"`
	UID       string    `json:"uid"`
	Node      string    `json:"node,omitempty"`
	Namespace string    `json:"ns,omitempty"`
	Outcome   Outcome   `json:"outcome"`
}

// ledgerState is what the ledger stores: entries oldest first.
type ledgerState struct {
	Entries []ledgerEntry `json:"entries"`
}

// ledgerStore keeps the ledger's state with optimistic concurrency: save fails with a
// Kubernetes Conflict error when the state changed since load returned version.
type ledgerStore interface {
	load(ctx context.Context) (st ledgerState, version string, err error)
	save(ctx context.Context, st ledgerState, version string) error
}

// ledger remembers recent evictions: per pod UID (for duplicates and the cooldown) and as
// records counted against the caps. A slot is reserved (and stored) before the Eviction API
// call and committed or released after it, so concurrent alerts never exceed a cap together
// and a replica that crashes mid-eviction leaves its slot held. With a ConfigMap store every
// decision reads the stored copy, so replicas share caps and cooldowns across restarts and
// leader changes.
type ledger struct {
	store    ledgerStore
	horizon  time.Duration // how long entries are kept: max(cooldown, cap window, MinLedgerHorizon)
	cooldown time.Duration
	// inProgress is how long a reserved slot may stand for an eviction still under way
	// (the handling of one alert); an older one was left by a replica that crashed.
	inProgress time.Duration
	// writing is held by the one caller writing a batch: this process's read-modify-write
	// cycles never race each other (fewer conflicts).
	writing chan struct{}
	mu      sync.Mutex      // guards pending
	pending []*ledgerChange // changes waiting for the next batch, oldest first
}

// ledgerChange is one caller's change, applied in a batch by whichever caller writes next.
type ledgerChange struct {
	now    time.Time
	change func(*ledgerState) bool
	done   chan error // receives the batch's result once
}

// uidEntry is the last eviction the remediator made (or would have made, or attempted) of
// one pod UID.
type uidEntry struct {
	At      time.Time
	Outcome Outcome // OutcomeEvicted, OutcomeDryRun or outcomeReserved
}

func newLedger(store ledgerStore, cooldown, capWindow time.Duration) *ledger {
	return &ledger{store: store, cooldown: cooldown, horizon: max(cooldown, capWindow, MinLedgerHorizon),
		inProgress: time.Minute, writing: make(chan struct{}, 1)}
}

// last returns the last eviction of uid, if remembered.
func (l *ledger) last(ctx context.Context, uid string) (uidEntry, bool, error) {
	st, _, err := l.store.load(ctx)
	if err != nil {
		return uidEntry{}, false, fmt.Errorf("loading the eviction ledger: %w", err)
	}
	e, ok := lastOf(st.Entries, uid)
	return e, ok, nil
}

// lastOf returns the newest entry of uid.
func lastOf(entries []ledgerEntry, uid string) (uidEntry, bool) {
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].UID == uid {
			return uidEntry{At: entries[i].At, Outcome: entries[i].Outcome}, true
		}
	}
	return uidEntry{}, false
}

// declines returns the skip reason and why when last, the newest entry of uid, forbids
// another eviction of uid at now, or "".
func (l *ledger) declines(uid string, last uidEntry, now time.Time) (string, string) {
	switch {
	case last.Outcome == OutcomeEvicted:
		return SkipDuplicate, fmt.Sprintf("uid %s was already evicted at %s", uid, last.At.UTC().Format(time.RFC3339))
	case last.Outcome == outcomeUnconfirmed:
		return "", ""
	case inCooldown(last.At, now, l.cooldown):
		return SkipCooldown, fmt.Sprintf("uid %s was handled (%s) at %s, within the %s cooldown", uid, last.Outcome, last.At.UTC().Format(time.RFC3339), l.cooldown)
	case last.Outcome == outcomeReserved && now.Sub(last.At) < l.inProgress:
		// Another replica (a leader that has not yet noticed losing the Lease) is
		// evicting it right now, even with no cooldown.
		return SkipDuplicate, fmt.Sprintf("uid %s is being evicted (slot reserved at %s)", uid, last.At.UTC().Format(time.RFC3339))
	}
	return "", ""
}

// capsReached returns the cap, and why, that one more eviction in namespace would exceed on
// the watched copy of the ledger, whatever the pod's node (its per-node cap needs the pod,
// which reserve checks on the stored copy); "" when none. A storm of alerts beyond the
// namespace's or the cluster's cap is then answered without a pod GET, a live walk and an
// Event each (TestFleetStorm).
func (l *ledger) capsReached(ctx context.Context, namespace string, now time.Time, caps Caps) (string, string, error) {
	if caps.PerNamespace <= 0 && caps.Global <= 0 {
		return "", "", nil
	}
	st, _, err := l.store.load(ctx)
	if err != nil {
		return "", "", fmt.Errorf("loading the eviction ledger: %w", err)
	}
	caps.PerNode = 0
	if reason := capExceeded(records(st.Entries), "", namespace, now, caps); reason != "" {
		return reason, fmt.Sprintf("eviction cap %s reached within %s", reason, caps.Window), nil
	}
	return "", "", nil
}

// answerFromLedger answers a pod UID already evicted, or being evicted, from the watch cache.
func (s *Server) answerFromLedger(ctx context.Context, r *remediation) (bool, error) {
	// A delivery of a pod already evicted, or being evicted by another replica, is answered
	// without an API request, so bursts of duplicates do not queue in the client's rate limit.
	// A dry-run entry (cooldown) is left to the checks after it, which name their own reasons.
	last, remembered, err := s.ledger.last(ctx, r.t.UID)
	if err != nil {
		r.decide(OutcomeError, "ledger_error", "reading the eviction ledger failed; nothing done, retry")
		return true, err
	}
	r.last, r.remembered = last, remembered
	if remembered && last.Outcome != OutcomeDryRun {
		if reason, why := s.ledger.declines(r.t.UID, last, s.now()); reason != "" {
			r.decide(OutcomeSkipped, reason, "pod %s/%s: %s", r.t.Namespace, r.t.Pod, why)
			return true, nil
		}
	}
	return false, nil
}

// declineAtCaps answers a storm beyond a namespace's or the cluster's cap without the pod.
func (s *Server) declineAtCaps(ctx context.Context, r *remediation) (bool, error) {
	// The answer is known without the pod, its measurement or an Event, so a fleet-wide storm
	// beyond the caps costs no API request per delivery. Nothing was verified, so nothing is
	// recorded on the pod. A UID the ledger holds may hold a slot of its own (an unconfirmed
	// attempt): reserve decides for it.
	if r.remembered {
		return false, nil
	}
	reason, why, err := s.ledger.capsReached(ctx, r.t.Namespace, s.now(), s.cfg.Caps)
	if err != nil {
		r.decide(OutcomeError, "ledger_error", "reading the eviction ledger failed; nothing done, retry")
		return true, err
	}
	if reason != "" {
		r.decide(OutcomeSkipped, reason, "pod %s/%s not checked: %s", r.t.Namespace, r.t.Pod, why)
		return true, nil
	}
	return false, nil
}

// reserveSlot lets the stored ledger decide: another replica may have acted since last was read.
func (s *Server) reserveSlot(ctx context.Context, r *remediation) (bool, error) {
	pod, usage := r.pod, r.usage
	slot, reason, why, err := s.ledger.reserve(ctx, r.t.UID, pod.Spec.NodeName, pod.Namespace, r.now, s.cfg.Caps)
	if err != nil {
		r.decide(OutcomeError, "ledger_error", "%s; reserving an eviction slot in the ledger failed; nothing done, retry", usage)
		return true, err
	}
	if reason != "" {
		r.decide(OutcomeSkipped, reason, "%s; not evicted: %s", usage, why)
		if reason != SkipCooldown && reason != SkipDuplicate {
			s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventOverLimit, ActionCheck, "%s; not evicted: %s", usage, why)
		}
		return true, nil
	}
	r.slot = slot
	return false, nil
}

// records are the entries as the caps count them.
func records(entries []ledgerEntry) []evictionRecord {
	recs := make([]evictionRecord, 0, len(entries))
	for _, e := range entries {
		recs = append(recs, evictionRecord{At: e.At, Node: e.Node, Namespace: e.Namespace})
	}
	return recs
}

// reservation is a cap slot held while an eviction is attempted.
type reservation struct {
	l  *ledger
	id string
	// unconfirmed: the slot was left by an earlier attempt on the same pod UID whose answer
	// was lost; that eviction may still be carried out, so the slot is never given back.
	unconfirmed bool
}

// reserve checks, on the stored copy, that uid was not evicted nor is in its cooldown and
// that one more eviction fits the caps, and then stores a slot for it. When the eviction must
// not happen it returns the skip reason and why.
func (l *ledger) reserve(ctx context.Context, uid, node, namespace string, now time.Time, caps Caps) (*reservation, string, string, error) {
	id := newEntryID()
	var reason, why string
	var reused bool
	err := l.update(ctx, now, func(st *ledgerState) bool {
		reason, why, reused = "", "", false
		if last, ok := lastOf(st.Entries, uid); ok {
			if reason, why = l.declines(uid, last, now); reason != "" {
				return false
			}
		}
		// An earlier attempt on this pod whose answer was lost holds a slot already: this
		// attempt takes it over rather than a second one.
		for i := len(st.Entries) - 1; i >= 0; i-- {
			if e := &st.Entries[i]; e.UID == uid && e.Outcome == outcomeUnconfirmed {
				e.ID, e.At, e.Outcome, e.Node, e.Namespace = id, now, outcomeReserved, node, namespace
				reused = true
				return true
			}
		}
		if reason = capExceeded(records(st.Entries), node, namespace, now, caps); reason != "" {
			why = fmt.Sprintf("eviction cap %s reached within %s", reason, caps.Window)
			return false
		}
		st.Entries = append(st.Entries, ledgerEntry{ID: id, At: now, UID: uid, Node: node, Namespace: namespace, Outcome: outcomeReserved})
		return true
	})
	if err != nil {
		return nil, "", "", fmt.Errorf("reserving an eviction slot: %w", err)
	}
	if reason != "" {
		return nil, reason, why, nil
	}
	return &reservation{l: l, id: id, unconfirmed: reused}, "", "", nil
}

// commit keeps the slot and records what happened (OutcomeEvicted, OutcomeDryRun or
// outcomeUnconfirmed) at at; a zero at keeps the slot's time.
func (r *reservation) commit(ctx context.Context, outcome Outcome, at time.Time) error {
	err := r.l.update(ctx, at, func(st *ledgerState) bool {
		for i := range st.Entries {
			if st.Entries[i].ID == r.id {
				st.Entries[i].Outcome = outcome
				if !at.IsZero() {
					st.Entries[i].At = at
				}
				return true
			}
		}
		return false // pruned meanwhile: nothing left to commit
	})
	if err != nil {
		return fmt.Errorf("recording the eviction in the ledger: %w", err)
	}
	return nil
}

// release gives the slot back: no eviction happened. A slot taken over from an unconfirmed
// attempt stays held as unconfirmed: that attempt may still be carried out.
func (r *reservation) release(ctx context.Context) error {
	if r.unconfirmed {
		return r.commit(ctx, outcomeUnconfirmed, time.Time{})
	}
	err := r.l.update(ctx, time.Time{}, func(st *ledgerState) bool {
		n := len(st.Entries)
		st.Entries = slices.DeleteFunc(st.Entries, func(e ledgerEntry) bool { return e.ID == r.id })
		return len(st.Entries) != n
	})
	if err != nil {
		return fmt.Errorf("releasing the eviction slot: %w", err)
	}
	return nil
}

// commitSlot records an eviction in the ledger. On failure the slot stays reserved, which
// counts against the caps and the cooldown all the same.
func (s *Server) commitSlot(ctx context.Context, slot *reservation, outcome Outcome, at time.Time) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerWriteTimeout)
	defer cancel()
	if err := slot.commit(ctx, outcome, at); err != nil {
		s.logger.Warn("eviction ledger not updated; the slot stays reserved", "err", err)
	}
}

// releaseSlot gives a slot back after no eviction happened. On failure the slot stays held
// until the cap window ends: fewer evictions, never more.
func (s *Server) releaseSlot(ctx context.Context, slot *reservation) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerWriteTimeout)
	defer cancel()
	if err := slot.release(ctx); err != nil {
		s.logger.Warn("eviction slot not released; it stays held until the cap window ends", "err", err)
	}
}

// ledgerWriteTimeout bounds recording the result of an eviction that already happened, even
// when the alert's own time ran out.
const ledgerWriteTimeout = 10 * time.Second

// update loads the state, prunes it at now (unless zero), applies change and saves the
// result when change or the pruning modified it, retrying on conflicts with another writer.
//
// Changes that arrive while a write is in flight are applied together, in arrival order,
// by the next write (group commit): under a burst the ledger costs one read-modify-write
// per batch, not per change, so no change waits behind hundreds of others. Each change
// sees the ones before it, so caps hold exactly within a batch too. A caller whose ctx ends
// before its change was taken into a batch withdraws it.
func (l *ledger) update(ctx context.Context, now time.Time, change func(*ledgerState) bool) error {
	c := &ledgerChange{now: now, change: change, done: make(chan error, 1)}
	l.mu.Lock()
	l.pending = append(l.pending, c)
	l.mu.Unlock()
	for {
		select {
		case err := <-c.done: // another caller's batch carried it
			return err
		case l.writing <- struct{}{}:
			select {
			case err := <-c.done:
				<-l.writing
				return err
			default:
			}
			l.writeBatch(ctx)
			<-l.writing
		case <-ctx.Done():
			l.mu.Lock()
			i := slices.Index(l.pending, c)
			if i >= 0 {
				l.pending = slices.Delete(l.pending, i, i+1)
			}
			l.mu.Unlock()
			if i >= 0 {
				return ctx.Err()
			}
			return <-c.done // taken into a batch already: its result comes
		}
	}
}

// writeBatch takes every pending change and stores them with one read-modify-write.
func (l *ledger) writeBatch(ctx context.Context) {
	l.mu.Lock()
	batch := l.pending
	l.pending = nil
	l.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	// The batch carries other callers' changes: it is not bound to this caller's deadline.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerWriteTimeout)
	defer cancel()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		st, version, err := l.store.load(ctx)
		if err != nil {
			return err
		}
		changed := false
		for _, c := range batch {
			if !c.now.IsZero() && l.prune(&st, c.now) {
				changed = true
			}
			if c.change(&st) {
				changed = true
			}
		}
		if !changed {
			return nil
		}
		return l.store.save(ctx, st, version)
	})
	for _, c := range batch {
		c.done <- err
	}
}

// prune drops entries past the horizon and the oldest beyond MaxLedgerEntries. It reports
// whether it dropped any.
func (l *ledger) prune(st *ledgerState, now time.Time) bool {
	n := len(st.Entries)
	st.Entries = slices.DeleteFunc(st.Entries, func(e ledgerEntry) bool { return now.Sub(e.At) >= l.horizon })
	if extra := len(st.Entries) - MaxLedgerEntries; extra > 0 {
		slices.SortStableFunc(st.Entries, func(a, b ledgerEntry) int { return a.At.Compare(b.At) })
		st.Entries = slices.Delete(st.Entries, 0, extra)
	}
	return len(st.Entries) != n
}

func newEntryID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// keyedMutex serializes work per key (a pod UID) without one lock for everything.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu      sync.Mutex
	holders int
}

// lock blocks until key is free and returns the function that frees it.
func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	e := k.m[key]
	if e == nil {
		e = &keyedEntry{}
		k.m[key] = e
	}
	e.holders++
	k.mu.Unlock()

	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		e.holders--
		if e.holders == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

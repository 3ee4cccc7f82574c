package remediator

import (
	"sync"
	"time"
)

// ledger remembers recent evictions: per pod UID (for duplicates and the cooldown) and as a
// list of records counted against the caps. A slot is reserved before the Eviction API call
// and committed or released after it, so concurrent alerts for different pods never exceed
// a cap together.
type ledger struct {
	mu      sync.Mutex
	byUID   map[string]uidEntry
	records []*evictionRecord
	horizon time.Duration // how long entries are kept: max(cooldown, cap window)
}

// uidEntry is the last eviction the remediator made (or would have made) of one pod UID.
type uidEntry struct {
	At      time.Time
	Outcome Outcome // OutcomeEvicted or OutcomeDryRun
}

func newLedger(horizon time.Duration) *ledger {
	return &ledger{byUID: map[string]uidEntry{}, horizon: horizon}
}

// last returns the last eviction of uid, if remembered.
func (l *ledger) last(uid string) (uidEntry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.byUID[uid]
	return e, ok
}

// reservation is a cap slot held while an eviction is attempted.
type reservation struct {
	l   *ledger
	rec *evictionRecord
}

// reserve checks the caps for one more eviction and, when it fits, holds a slot for it. It
// returns the skip reason when a cap is reached.
func (l *ledger) reserve(node, namespace string, now time.Time, caps Caps) (*reservation, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gcLocked(now)
	recs := make([]evictionRecord, 0, len(l.records))
	for _, r := range l.records {
		recs = append(recs, *r)
	}
	if reason := capExceeded(recs, node, namespace, now, caps); reason != "" {
		return nil, reason
	}
	rec := &evictionRecord{At: now, Node: node, Namespace: namespace}
	l.records = append(l.records, rec)
	return &reservation{l: l, rec: rec}, ""
}

// commit keeps the slot and remembers the eviction of uid.
func (r *reservation) commit(uid string, outcome Outcome, at time.Time) {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	r.l.byUID[uid] = uidEntry{At: at, Outcome: outcome}
}

// release gives the slot back: no eviction happened.
func (r *reservation) release() {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	for i, rec := range r.l.records {
		if rec == r.rec {
			r.l.records = append(r.l.records[:i], r.l.records[i+1:]...)
			return
		}
	}
}

func (l *ledger) gcLocked(now time.Time) {
	if l.horizon <= 0 {
		return
	}
	kept := l.records[:0]
	for _, r := range l.records {
		if now.Sub(r.At) < l.horizon {
			kept = append(kept, r)
		}
	}
	for i := len(kept); i < len(l.records); i++ {
		l.records[i] = nil
	}
	l.records = kept
	for uid, e := range l.byUID {
		if now.Sub(e.At) >= l.horizon {
			delete(l.byUID, uid)
		}
	}
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

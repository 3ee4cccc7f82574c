package live

import (
	"testing"
	"time"
)

// fakeClock is a clock the test moves on.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// spend admits a walk of namespace by caller expected to cost estimate, and charges it cost in
// steps of 100 ms until it is cut; it returns the walk (nil: refused), the scope of a refusal,
// what the walk spent, and whether (and by which scope) it was cut.
func spend(t *testing.T, l *Budgets, caller, namespace string, estimate, cost time.Duration) (w *Walk, refused string, spent time.Duration, cutBy string) {
	t.Helper()
	cut := false
	w, _, refused = l.Of(caller, namespace).Admit(estimate, func() { cut = true })
	if w == nil {
		return nil, refused, 0, ""
	}
	for left := cost; left > 0 && !cut; left -= 100 * time.Millisecond {
		w.Meter().Add(min(left, 100*time.Millisecond))
	}
	if was, scope := w.Cut(); was != cut {
		t.Fatalf("Cut() = %v, the cut func was called: %v", was, cut)
	} else if was {
		cutBy = scope
	}
	return w, "", w.Meter().Spent(), cutBy
}

// TestAdmitCutsAtTheScarcerBudget: a walk is cut once it has exhausted either budget it draws
// on, its namespace's or its caller's in all, and says which; neither goes into debt beyond a
// charge.
func TestAdmitCutsAtTheScarcerBudget(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	l := NewBudgets(clk.now)
	// 60 CPU-s walk of ns-a: cut once ns-a's 10 CPU-s are spent.
	if _, _, spent, cutBy := spend(t, l, "r", "ns-a", 0, time.Minute); cutBy != ScopeNamespace || spent != 10100*time.Millisecond {
		t.Errorf("costly walk: spent %v, cut by %q; want 10.1s, cut by namespace", spent, cutBy)
	}
	// The caller holds 19.9 CPU-s: two 9 CPU-s walks of other namespaces leave 1.9, and a third
	// is cut by the caller's budget, its namespace's still in credit.
	spend(t, l, "r", "ns-b", 0, 9*time.Second)
	spend(t, l, "r", "ns-c", 0, 9*time.Second)
	if _, _, spent, cutBy := spend(t, l, "r", "ns-d", 0, 9*time.Second); cutBy != ScopeCaller || spent != 2*time.Second {
		t.Errorf("walk on the caller's last 1.9 CPU-s: spent %v, cut by %q; want 2s, cut by caller", spent, cutBy)
	}
	if _, refused, _, _ := spend(t, l, "r", "ns-e", 0, time.Second); refused != ScopeCaller {
		t.Errorf("a walk on a spent caller budget: refused %q, want caller", refused)
	}
	if w, _, _, _ := spend(t, l, "other", "ns-a", 0, time.Second); w == nil {
		t.Errorf("another caller's walk of ns-a refused: budgets are per caller")
	}
}

// TestAdmitWaitsForTheEstimate: a walk whose cost is known starts once both budgets hold it, up
// to a full bucket (a walk costlier than the bucket starts on a full one), and the wait says so.
func TestAdmitWaitsForTheEstimate(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	l := NewBudgets(clk.now)
	spend(t, l, "r", "ns-a", 0, 6*time.Second) // ns-a holds 4 CPU-s
	if w, wait, scope := l.Of("r", "ns-a").Admit(5*time.Second, func() {}); w != nil || wait != 10*time.Second || scope != ScopeNamespace {
		t.Errorf("5 CPU-s on 4: %v, wait %v, %q; want refused for 10s (1 CPU-s at 10 %%), namespace", w != nil, wait, scope)
	}
	if w, _, _ := l.Of("r", "ns-a").Admit(4*time.Second, func() {}); w == nil {
		t.Errorf("4 CPU-s on 4 refused")
	}
	clk.t = clk.t.Add(time.Minute) // full again
	if w, wait, _ := l.Of("r", "ns-a").Admit(time.Hour, func() {}); w == nil {
		t.Errorf("a walk costlier than a full bucket refused on a full one (wait %v)", wait)
	}
}

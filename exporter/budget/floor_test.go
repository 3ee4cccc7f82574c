package budget

import (
	"testing"
	"time"
)

// TestFloorShares: the floor is the budget's share split evenly among the namespaces of the
// node's pods, each part saved up to its part of the bucket; a floor walk starts while its
// namespace's part covers its estimate (or is full), and is charged what it spent; a debt
// outlives the namespace's pods.
func TestFloorShares(t *testing.T) {
	now := t0
	// 10 % of a core, a bucket of 2 s.
	f := NewFloor(0.1, 2*time.Second, func() time.Time { return now })
	credit := func(ns string) time.Duration {
		if a := f.accounts[ns]; a != nil {
			return a.credit
		}
		return 0
	}
	two := map[string]bool{"shop": true, "tenant": true}

	f.Fill(two) // new namespaces save up from now on
	if f.Take("tenant", 0) {
		t.Fatal("a floor walk started on a part that saved nothing yet")
	}
	now = now.Add(10 * time.Second)
	f.Fill(two) // 1 s of share for 10 s, half each
	if credit("shop") != 500*time.Millisecond || credit("tenant") != 500*time.Millisecond {
		t.Fatalf("parts %v and %v after 10s, want 500ms each", credit("shop"), credit("tenant"))
	}
	now = now.Add(time.Minute)
	f.Fill(two) // each saves up to half the bucket, no more
	if credit("shop") != time.Second {
		t.Fatalf("part %v after a minute more, want 1s (half of the 2s bucket)", credit("shop"))
	}

	// The tenant's walks: each sets its estimate aside, so that two cannot start on one
	// part's credit; a costlier one starts on a full part.
	if !f.Take("tenant", 700*time.Millisecond) {
		t.Fatal("a 700ms walk refused on a full 1s part")
	}
	if f.Take("tenant", 700*time.Millisecond) {
		t.Error("a second 700ms walk started on the 300ms left")
	}
	f.Settle("tenant", 700*time.Millisecond, 2900*time.Millisecond) // it cost more than its last walk
	if credit("tenant") != -1900*time.Millisecond {
		t.Errorf("tenant's part %v after a 2.9s walk on 1s, want -1.9s", credit("tenant"))
	}
	if f.Take("tenant", 0) {
		t.Error("a floor walk started on a part in debt")
	}
	if !f.Take("shop", 5*time.Second) {
		t.Error("the other namespace's part, full, refused its walk: the tenant's debt is its own")
	}
	f.Settle("shop", 5*time.Second, time.Millisecond)

	// The tenant's pods leave: its debt stays, paid at the same pace; the shop, alone,
	// gets the whole share. Once paid, the tenant is forgotten.
	shop := map[string]bool{"shop": true}
	now = now.Add(10 * time.Second)
	f.Fill(shop)
	if credit("tenant") != -900*time.Millisecond || credit("shop") != 1999*time.Millisecond {
		t.Errorf("parts %v (tenant, gone) and %v (shop, alone) after 10s, want -900ms and 1.999s (the whole share)", credit("tenant"), credit("shop"))
	}
	now = now.Add(10 * time.Second)
	f.Fill(shop)
	if _, ok := f.accounts["tenant"]; ok {
		t.Error("the tenant's part is still kept once its debt is paid and its pods are gone")
	}
}

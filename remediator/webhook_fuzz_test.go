package remediator

import (
	"bytes"
	"errors"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	k8stesting "k8s.io/client-go/testing"
)

// FuzzWebhook posts hostile bodies to the whole webhook handler over a cluster holding one pod
// over its limit (victim), one under it (bystander) and one over it in a denied namespace.
// Whatever the body, a payload the decoder rejects gets the decoder's status and touches
// nothing, and the only pod ever evicted is the victim, at most once, and only when a firing
// alert names its namespace, name, UID and volume exactly.
func FuzzWebhook(f *testing.F) {
	const (
		victimUID    = "11111111-1111-1111-1111-111111111111"
		bystanderUID = "22222222-2222-2222-2222-222222222222"
		deniedUID    = "33333333-3333-3333-3333-333333333333"
	)
	victim := firing("default", "victim", victimUID)
	wrongVolume := firing("default", "victim", victimUID)
	wrongVolume.Labels[LabelVolume] = "other"
	traversal := firing("default", "victim", victimUID)
	traversal.Labels[LabelPod] = "../victim"
	evictsVictim := payloadJSON(f, victim)
	for _, seed := range [][]byte{
		evictsVictim,
		payloadJSON(f, victim, victim),
		payloadJSON(f, resolved(victim)),
		payloadJSON(f, firing("default", "victim", bystanderUID)),
		payloadJSON(f, firing("default", "bystander", bystanderUID)),
		payloadJSON(f, firing("kube-system", "denied", deniedUID)),
		payloadJSON(f, wrongVolume),
		payloadJSON(f, traversal),
		[]byte(`{"version":"4","alerts":[{"status":"firing","labels":{"namespace":"default","pod":"victim","uid":"` + victimUID + `","volume":"empty"}}]}`),
		[]byte(`{"version":"4","alerts":[{"status":"firing","labels":{"namespace":"default","pod":"victim","uid":"` + victimUID + `","volume":"empty"}}]}{}`),
		[]byte(`{"version":"3","alerts":[{"status":"firing","labels":{"namespace":"default","pod":"victim","uid":"` + victimUID + `","volume":"empty"}}]}`),
		[]byte(`{"version":"4","alerts":[{"status":"firing","labels":{"namespace":"default","pod":"victim","uid":"` + victimUID + `","volume":"empty","pod":"bystander"}}]}`),
	} {
		f.Add(seed)
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		cfg := testConfig()
		cfg.NamespaceDeny = []string{"kube-system"}
		e := newEnv(t, cfg,
			newPod("default", "victim", victimUID).build(),
			newPod("default", "bystander", bystanderUID).build(),
			newPod("kube-system", "denied", deniedUID).build())
		e.measurer.used[victimUID] = 10 * mib
		e.measurer.used[bystanderUID] = mib / 2
		e.measurer.used[deniedUID] = 10 * mib

		code, _ := e.post(body)

		evicted := evictedPods(e)
		p, err := DecodePayload(bytes.NewReader(body), cfg.MaxRequestBytes)
		if err != nil {
			var pe *PayloadError
			if !errors.As(err, &pe) {
				t.Fatalf("decoder error %v is not a *PayloadError", err)
			}
			if code != pe.Code || len(evicted) > 0 || e.measurer.calls > 0 {
				t.Fatalf("rejected payload (%d %s) answered %d after %d measurements, evicted %v",
					pe.Code, pe.Message, code, e.measurer.calls, evicted)
			}
			return
		}
		named := false
		for _, a := range p.Alerts {
			if a.Status == StatusFiring && a.Target() == (Target{Namespace: "default", Pod: "victim", UID: victimUID, Check: CheckEmptyDir, Volume: "empty"}) {
				named = true
			}
		}
		if bytes.Equal(body, evictsVictim) && len(evicted) != 1 {
			// The fixture must be able to evict, or the property below holds vacuously.
			t.Fatalf("the alert for the victim answered %d and evicted %v, want default/victim", code, evicted)
		}
		switch {
		case len(evicted) == 0:
		case len(evicted) == 1 && evicted[0] == "default/victim" && named:
		default:
			t.Fatalf("evicted %v; a firing alert for default/victim uid %s volume empty: %v", evicted, victimUID, named)
		}
	})
}

// evictedPods lists namespace/name of every Eviction API call made on the fake clientset.
func evictedPods(e *env) []string {
	var out []string
	for _, a := range e.client.Actions() {
		if a.GetVerb() != "create" || a.GetResource().Resource != "pods" || a.GetSubresource() != "eviction" {
			continue
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		out = append(out, ev.Namespace+"/"+ev.Name)
	}
	return out
}

package remediator

import (
	"errors"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// What a tenant writes in its own pod spec exempts nothing: the opt-out annotation, a
// DaemonSet as the pod's controller or a Node as its owner (without the mirror annotation,
// which the kubelet never runs a pod with) are exemptions only where the cluster operator
// grants them. By default that is kube-system, where tenants create no pods.
func TestTenantsCannotExemptThemselves(t *testing.T) {
	tests := []struct {
		name       string
		pod        *podBuilder
		wantOut    Outcome
		wantReason string
	}{
		{"tenant opts out, 100x over its limit", newPod("team-a", "writer", uid1).annotate(DefaultOptOutAnnotation, "false"), OutcomeEvicted, ""},
		{"tenant runs its writer as a DaemonSet", newPod("team-a", "writer", uid1).ownedBy("apps/v1", "DaemonSet"), OutcomeEvicted, ""},
		{"tenant names a Node as its controller", newPod("team-a", "writer", uid1).ownedBy("v1", "Node"), OutcomeEvicted, ""},
		{"opt-out in kube-system", newPod("kube-system", "agent", uid1).annotate(DefaultOptOutAnnotation, "false"), OutcomeSkipped, SkipOptOut},
		{"DaemonSet pod in kube-system", newPod("kube-system", "agent", uid1).ownedBy("apps/v1", "DaemonSet"), OutcomeSkipped, SkipDaemonSet},
		{"static pod (mirror annotation)", newPod("team-a", "etcd-node-1", uid1).annotate(corev1.MirrorPodAnnotationKey, "abc"), OutcomeSkipped, SkipMirrorPod},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Caps = Caps{}
			pod := tt.pod.build()
			e := newEnv(t, cfg, pod)
			e.measurer.used[uid1] = 100 * mib
			_, resp := e.post(payloadJSON(t, firing(pod.Namespace, pod.Name, uid1)))
			if got := resp.Alerts[0]; got.Outcome != tt.wantOut || got.Reason != tt.wantReason {
				t.Errorf("%s/%q, want %s/%q (%s)", got.Outcome, got.Reason, tt.wantOut, tt.wantReason, got.Message)
			}
			if n := countActions(e.client)["get namespaces"]; n != 0 {
				t.Errorf("%d namespace GETs: the default selectors need only the namespace's name", n)
			}
		})
	}
}

// An operator grants exemptions by labelling namespaces: the opt-out and DaemonSet pods are
// honoured where the namespace's labels match, read from the API server only for a pod that
// claims one; a namespace that cannot be read leaves the alert to a retry, never evicts.
func TestExemptionsGrantedByNamespaceLabels(t *testing.T) {
	grant := labels.SelectorFromSet(labels.Set{"emptydir-guard.io/exemptions": "granted"})
	tests := []struct {
		name       string
		ns         string // the pod's namespace: "granted" carries the label, "tenant" not
		pod        func(ns string) *podBuilder
		nsErr      bool
		wantCode   int
		wantReason string
		wantGets   int
	}{
		{"opt-out in a granted namespace", "granted", func(ns string) *podBuilder { return newPod(ns, "p", uid1).annotate(DefaultOptOutAnnotation, "false") }, false, http.StatusOK, SkipOptOut, 1},
		{"opt-out elsewhere", "tenant", func(ns string) *podBuilder { return newPod(ns, "p", uid1).annotate(DefaultOptOutAnnotation, "false") }, false, http.StatusOK, "", 1},
		{"DaemonSet pod in a granted namespace", "granted", func(ns string) *podBuilder { return newPod(ns, "p", uid1).ownedBy("apps/v1", "DaemonSet") }, false, http.StatusOK, SkipDaemonSet, 1},
		{"DaemonSet pod elsewhere", "tenant", func(ns string) *podBuilder { return newPod(ns, "p", uid1).ownedBy("apps/v1", "DaemonSet") }, false, http.StatusOK, "", 1},
		{"no claim: no namespace read", "tenant", func(ns string) *podBuilder { return newPod(ns, "p", uid1) }, false, http.StatusOK, "", 0},
		{"namespace unreadable", "granted", func(ns string) *podBuilder { return newPod(ns, "p", uid1).annotate(DefaultOptOutAnnotation, "false") }, true, http.StatusServiceUnavailable, "api_error", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.OptOutNamespaceSelector, cfg.DaemonSetNamespaceSelector = grant, grant
			pod := tt.pod(tt.ns).build()
			e := newEnv(t, cfg, pod)
			e.measurer.used[uid1] = 10 * mib
			for name, l := range map[string]map[string]string{"granted": {"emptydir-guard.io/exemptions": "granted"}, "tenant": nil} {
				if err := e.client.Tracker().Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}); err != nil {
					t.Fatal(err)
				}
			}
			if tt.nsErr {
				e.client.PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewInternalError(errors.New("etcd down"))
				})
			}
			code, resp := e.post(payloadJSON(t, firing(pod.Namespace, pod.Name, uid1)))
			got := resp.Alerts[0]
			if code != tt.wantCode || got.Reason != tt.wantReason {
				t.Errorf("%d %s/%q, want %d reason %q (%s)", code, got.Outcome, got.Reason, tt.wantCode, tt.wantReason, got.Message)
			}
			if wantEvicted := tt.wantReason == ""; (e.evictions() == 1) != wantEvicted {
				t.Errorf("%d evictions, want evicted=%v", e.evictions(), wantEvicted)
			}
			if n := countActions(e.client)["get namespaces"]; n != tt.wantGets {
				t.Errorf("%d namespace GETs, want %d", n, tt.wantGets)
			}
		})
	}
}

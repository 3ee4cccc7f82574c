package helmchart_test

import (
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
	"github.com/emptydir-guard/emptydir-guard/internal/plugin"
	helmchart "github.com/emptydir-guard/emptydir-guard/test/helm"
)

// limitPolicy is the rendered limit policy and its binding; nils when the chart renders none.
func limitPolicy(t *testing.T, r rendered) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	policies := deploytest.All[*admissionregistrationv1.ValidatingAdmissionPolicy](r.objs)
	bindings := deploytest.All[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](r.objs)
	if len(policies) != len(bindings) || len(policies) > 1 {
		t.Fatalf("%d policies, %d bindings: want one of each or none", len(policies), len(bindings))
	}
	if len(policies) == 0 {
		return nil, nil
	}
	if bindings[0].Spec.PolicyName != policies[0].Name {
		t.Fatalf("the binding binds %q, the policy is %q", bindings[0].Spec.PolicyName, policies[0].Name)
	}
	return policies[0], bindings[0]
}

// variable is the expression of the policy's variable name.
func variable(p *admissionregistrationv1.ValidatingAdmissionPolicy, name string) string {
	for _, v := range p.Spec.Variables {
		if v.Name == name {
			return v.Expression
		}
	}
	return ""
}

// resourcesMatched are the policy's resources as group/resource, and their operations.
func resourcesMatched(p *admissionregistrationv1.ValidatingAdmissionPolicy) map[string][]admissionregistrationv1.OperationType {
	out := map[string][]admissionregistrationv1.OperationType{}
	for _, r := range p.Spec.MatchConstraints.ResourceRules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				out[g+"/"+res] = r.Operations
			}
		}
	}
	return out
}

// TestLimitPolicy: the limit policy is off by default (chart and kustomize base); on, its
// binding has the values' actions and namespaces (the exemption label's among them), the
// policy matches pods at creation and the workloads' templates, and each check and the
// message come from the values. What it admits and refuses is proven in the API server's
// admission code (the tests below) and on a real API server (TestLimitPolicyOnRealAPIServer).
func TestLimitPolicy(t *testing.T) {
	with := func(v string) helmchart.Release {
		r := release("guard")
		if err := yaml.Unmarshal([]byte(v), &r.Values); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for name, r := range map[string]helmchart.Release{"defaults": release("guard"), "base": helmchart.BaseRelease(root, nil)} {
		if p, _ := limitPolicy(t, render(t, r)); p != nil {
			t.Errorf("%s: the limit policy %s is rendered, want it off by default", name, p.Name)
		}
	}

	p, b := limitPolicy(t, render(t, with("limitPolicy: {enabled: true}")))
	if p == nil {
		t.Fatal("limitPolicy.enabled: no policy rendered")
	}
	if p.Name != "guard-emptydir-limits" || p.Namespace != "" || b.Namespace != "" {
		t.Errorf("policy %s/%s, binding %s/%s: want guard-emptydir-limits, cluster-wide", p.Namespace, p.Name, b.Namespace, b.Name)
	}
	if want := []admissionregistrationv1.ValidationAction{"Warn", "Audit"}; !slices.Equal(b.Spec.ValidationActions, want) {
		t.Errorf("default actions %v, want %v", b.Spec.ValidationActions, want)
	}
	wantExcluded := metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "guard"}}
	wantExempt := metav1.LabelSelectorRequirement{Key: policyExemptKey, Operator: metav1.LabelSelectorOpNotIn, Values: []string{policyExemptValue}}
	if sel := b.Spec.MatchResources.NamespaceSelector; sel == nil || len(sel.MatchLabels) != 0 || len(sel.MatchExpressions) != 2 ||
		!equalRequirement(sel.MatchExpressions[0], wantExcluded) || !equalRequirement(sel.MatchExpressions[1], wantExempt) {
		t.Errorf("default namespaceSelector %+v, want every namespace but kube-system, the release's and those labelled %s=%s", sel, policyExemptKey, policyExemptValue)
	}
	matched := resourcesMatched(p)
	if ops := matched["/pods"]; !slices.Equal(ops, []admissionregistrationv1.OperationType{"CREATE"}) {
		t.Errorf("pods matched at %v, want CREATE only (an update cannot change their limits)", ops)
	}
	for _, w := range []string{"apps/deployments", "apps/replicasets", "apps/statefulsets", "apps/daemonsets", "batch/jobs", "batch/cronjobs", "/replicationcontrollers"} {
		if ops := matched[w]; !slices.Equal(ops, []admissionregistrationv1.OperationType{"CREATE", "UPDATE"}) {
			t.Errorf("%s matched at %v, want CREATE and UPDATE", w, ops)
		}
	}
	if len(matched) != 8 {
		t.Errorf("matched %v, want pods and the seven kinds with pod templates", matched)
	}
	if len(p.Spec.Validations) != 1 || !strings.Contains(p.Spec.Validations[0].MessageExpression, "see docs/policy.md") {
		t.Errorf("validations %+v, want one whose message points to docs/policy.md", p.Spec.Validations)
	}
	if strings.Contains(p.Spec.Validations[0].Expression, "exempt") || variable(p, "exempt") != "" {
		t.Errorf("validation %s, variables %+v: want nothing of the pod's own exempting it", p.Spec.Validations[0].Expression, p.Spec.Variables)
	}
	if len(p.Spec.MatchConditions) != 1 || !strings.Contains(p.Spec.MatchConditions[0].Expression, "'system:serviceaccount:kube-system:replicaset-controller'") {
		t.Errorf("matchConditions %+v, want one leaving out the built-in controllers' requests", p.Spec.MatchConditions)
	}
	if !strings.Contains(variable(p, "withoutSizeLimit"), "sizeLimit") || !strings.Contains(variable(p, "withoutEphemeralStorageLimit"), "'ephemeral-storage'") {
		t.Errorf("variables %+v, want both checks", p.Spec.Variables)
	}
	if *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy %s", *p.Spec.FailurePolicy)
	}

	p, b = limitPolicy(t, render(t, with(`limitPolicy:
  enabled: true
  validationActions: [Deny]
  checks: {sizeLimit: false}
  workloads: false
  namespaceSelector: {matchLabels: {team: shop}, matchExpressions: [{key: tier, operator: Exists}]}
  excludedNamespaces: [kube-system, ops]
  excludeReleaseNamespace: false
  exemptNamespaceLabel: {key: example.com/no-limits, value: "yes"}
  message: "Ask the platform team's 'sizing' channel."`)))
	if !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{"Deny"}) {
		t.Errorf("actions %v, want [Deny]", b.Spec.ValidationActions)
	}
	sel := b.Spec.MatchResources.NamespaceSelector
	if sel == nil || sel.MatchLabels["team"] != "shop" || len(sel.MatchExpressions) != 3 || sel.MatchExpressions[0].Key != "tier" ||
		!equalRequirement(sel.MatchExpressions[1], metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "ops"}}) ||
		!equalRequirement(sel.MatchExpressions[2], metav1.LabelSelectorRequirement{Key: "example.com/no-limits", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"yes"}}) {
		t.Errorf("namespaceSelector %+v, want the values' selector, NotIn [kube-system ops] and example.com/no-limits NotIn [yes]", sel)
	}
	if matched := resourcesMatched(p); len(matched) != 1 || matched["/pods"] == nil {
		t.Errorf("workloads false: matched %v, want pods only", matched)
	}
	if len(p.Spec.MatchConditions) != 0 {
		t.Errorf("workloads false: matchConditions %+v, want none (no template is checked, so every pod is)", p.Spec.MatchConditions)
	}
	if e := variable(p, "withoutSizeLimit"); e != "[]" {
		t.Errorf("checks.sizeLimit false: withoutSizeLimit %q, want []", e)
	}
	// A quote in the message is escaped in its CEL string.
	if m := p.Spec.Validations[0].MessageExpression; !strings.Contains(m, `'Ask the platform team\'s \'sizing\' channel.'`) {
		t.Errorf("messageExpression %s, want the message as a CEL string", m)
	}

	for _, tc := range []struct{ values, want string }{
		{"limitPolicy: {enabled: true, validationActions: [Deny, Warn]}", "Deny and Warn cannot go together"},
		{"limitPolicy: {enabled: true, checks: {sizeLimit: false, ephemeralStorage: false}}", "needs at least one of"},
		{"limitPolicy: {enabled: true, validationActions: [Block]}", "validationActions"},
		{"limitPolicy: {enabled: true, validationActions: []}", "validationActions"},
		{"limitPolicy: {enabled: true, exemptNamespaceLabel: {key: 'bad key', value: x}}", "key"},
		{"limitPolicy: {enabled: true, exemption: {key: example.com/no-limits, value: 'yes'}}", "limitPolicy.exemption is gone"},
		{"limitPolicy: {enabled: true, excludedNamespaces: [Kube_System]}", "excludedNamespaces"},
		{"limitPolicy: {enabled: true, namespaceSelector: {matchLabel: {a: b}}}", "matchLabel"},
	} {
		if _, err := helmchart.Render(root, with(tc.values)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %s: err %v, want one saying %q", tc.values, err, tc.want)
		}
	}
}

func equalRequirement(a, b metav1.LabelSelectorRequirement) bool {
	return a.Key == b.Key && a.Operator == b.Operator && slices.Equal(a.Values, b.Values)
}

// limitPolicyAdmitter renders the chart with the limit policy's values and loads its policy
// and binding into the API server's admission code, with the namespaces shop (a tenant's),
// exempt-by-label (labelled as the exemption asks), guard (the release's) and kube-system.
func limitPolicyAdmitter(t *testing.T, values string) *admitter {
	t.Helper()
	r := release("guard")
	if err := yaml.Unmarshal([]byte(values), &r.Values); err != nil {
		t.Fatal(err)
	}
	return newAdmitter(t, render(t, r),
		namespace("shop", map[string]string{"team": "shop"}),
		namespace("exempt-by-label", map[string]string{policyExemptKey: policyExemptValue}),
		namespace("other-value", map[string]string{policyExemptKey: "no"}),
		namespace("guard", nil),
		namespace("kube-system", nil))
}

// The chart's default exemption label (values.yaml, limitPolicy.exemptNamespaceLabel).
const (
	policyExemptKey   = "emptydir-guard.io/limits-policy"
	policyExemptValue = "exempt"
)

// flaggedMessage is what the policy says of policyPod.
const flaggedMessage = "emptyDir volumes without a sizeLimit: cache, zero. containers without an ephemeral-storage limit: init, sidecar, app. "

// policyPod is a pod the limit policy flags on every count unless options change it: an init
// container (init) and a restartable one (sidecar) without an ephemeral-storage limit, a
// container (app) whose limit is 0, a disk emptyDir without a sizeLimit (cache) and one whose
// sizeLimit is 0 (zero): the kubelet enforces neither 0. A memory emptyDir (ram) needs none.
func policyPod(ns, name string, options ...func(*corev1.Pod)) *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	ctr := func(name string) corev1.Container { return corev1.Container{Name: name, Image: "busybox"} }
	sidecar := ctr("sidecar")
	sidecar.RestartPolicy = &always
	zero := resource.MustParse("0")
	app := ctr("app")
	app.Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: zero}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{ctr("init"), sidecar},
			Containers:     []corev1.Container{app},
			Volumes: []corev1.Volume{
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "zero", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &zero}}},
				{Name: "ram", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			},
		},
	}
	for _, o := range options {
		o(p)
	}
	return p
}

// withContainerLimits gives every container an ephemeral-storage limit.
func withContainerLimits(p *corev1.Pod) {
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			cs[i].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("64Mi")}}
		}
	}
}

// withSizeLimits gives every disk emptyDir a sizeLimit of 16Mi.
func withSizeLimits(p *corev1.Pod) {
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.Medium == "" {
			limit := resource.MustParse("16Mi")
			v.EmptyDir.SizeLimit = &limit
		}
	}
}

// selfExempt labels and annotates the pod (or the template it is made into) with the
// exemption, as a tenant may.
func selfExempt(p *corev1.Pod) {
	p.Labels = map[string]string{policyExemptKey: policyExemptValue}
	p.Annotations = map[string]string{policyExemptKey: policyExemptValue}
}

// ownedBy gives the pod a controller ownerReference to a kind/name of apiVersion, as its
// controller would, or as a tenant may write it.
func ownedBy(apiVersion, kind, name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name,
			UID: types.UID("uid-of-" + name), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	}
}

// template is p as a workload's pod template.
func template(p *corev1.Pod) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: p.Labels, Annotations: p.Annotations}, Spec: p.Spec}
}

// policyDeployment, policyReplicaSet, policyJob: workloads of policyPod's template with the
// options, their own metadata labelled as the template is.
func policyDeployment(ns, name string, options ...func(*corev1.Pod)) *appsv1.Deployment {
	p := policyPod(ns, name, options...)
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: p.Labels, Annotations: p.Annotations},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{}, Template: template(p)}}
}

func policyReplicaSet(ns, name string, options ...func(*corev1.Pod)) *appsv1.ReplicaSet {
	p := policyPod(ns, name, options...)
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: p.Labels, Annotations: p.Annotations},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{}, Template: template(p)}}
}

func policyJob(ns, name string, options ...func(*corev1.Pod)) *batchv1.Job {
	p := policyPod(ns, name, options...)
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: batchv1.JobSpec{Template: template(p)}}
}

// TestLimitPolicyExemptsNamespacesNotPods (issue 37, item 4): under Deny, in the API server's
// own admission code, an exemption is a Namespace's label, which a cluster admin sets. A pod,
// or a workload's template, that labels or annotates itself exempt is refused like any other:
// the tenant writes those. A pod without limits is admitted in a namespace labelled exempt,
// in the release namespace and in kube-system.
func TestLimitPolicyExemptsNamespacesNotPods(t *testing.T) {
	a := limitPolicyAdmitter(t, "limitPolicy: {enabled: true, validationActions: [Deny]}")
	labelled := func(p *corev1.Pod) { p.Labels = map[string]string{policyExemptKey: policyExemptValue} }
	annotated := func(p *corev1.Pod) { p.Annotations = map[string]string{policyExemptKey: policyExemptValue} }
	for _, tc := range []struct {
		what string
		obj  runtime.Object
	}{
		{"a pod without limits", policyPod("shop", "plain")},
		{"a pod labelled exempt", policyPod("shop", "labelled", labelled)},
		{"a pod annotated exempt", policyPod("shop", "annotated", annotated)},
		{"a Deployment labelled and annotated exempt, and its template", policyDeployment("shop", "self-exempt", selfExempt)},
		{"a Job whose template is labelled and annotated exempt", policyJob("shop", "self-exempt", selfExempt)},
		{"a pod labelled exempt, in a namespace whose label has another value", policyPod("other-value", "labelled", selfExempt)},
	} {
		if v := a.create(t, tc.obj, tenant); v.admitted() || !strings.Contains(v.err.Error(), flaggedMessage) {
			t.Errorf("Deny: %s: %s, want it refused with %q", tc.what, v, flaggedMessage)
		}
	}
	for _, tc := range []struct {
		what string
		obj  runtime.Object
	}{
		{"a pod without limits in a namespace labelled exempt", policyPod("exempt-by-label", "plain")},
		{"a Deployment without limits in a namespace labelled exempt", policyDeployment("exempt-by-label", "plain")},
		{"a pod without limits in the release namespace", policyPod("guard", "plain")},
		{"a pod without limits in kube-system", policyPod("kube-system", "plain")},
		{"a pod with every limit", policyPod("shop", "every-limit", withContainerLimits, withSizeLimits)},
	} {
		if v := a.create(t, tc.obj, tenant); !v.admitted() || len(v.warnings) > 0 {
			t.Errorf("Deny: %s: %s, want it admitted", tc.what, v)
		}
	}

	// Under Warn, the default, a self-exempt pod is warned of as any.
	a = limitPolicyAdmitter(t, "limitPolicy: {enabled: true}")
	if v := a.create(t, policyPod("shop", "labelled", selfExempt), tenant); !v.admitted() || len(v.warnings) != 1 || !strings.Contains(v.warnings[0], flaggedMessage) {
		t.Errorf("Warn: a pod labelled and annotated exempt: %s, want it admitted with the warning %q", v, flaggedMessage)
	}
	if v := a.create(t, policyPod("exempt-by-label", "plain"), tenant); v.flagged() {
		t.Errorf("Warn: a pod without limits in a namespace labelled exempt: %s, want no warning", v)
	}

	// The label is the values': another one exempts instead; key "" none.
	a = limitPolicyAdmitter(t, "limitPolicy: {enabled: true, validationActions: [Deny], exemptNamespaceLabel: {key: team, value: shop}}")
	if v := a.create(t, policyPod("shop", "plain"), tenant); !v.admitted() {
		t.Errorf("exemptNamespaceLabel team=shop: a pod in the namespace labelled so: %s, want it admitted", v)
	}
	if v := a.create(t, policyPod("exempt-by-label", "plain"), tenant); v.admitted() {
		t.Errorf("exemptNamespaceLabel team=shop: a pod in a namespace labelled %s=%s: %s, want it refused", policyExemptKey, policyExemptValue, v)
	}
	a = limitPolicyAdmitter(t, "limitPolicy: {enabled: true, validationActions: [Deny], exemptNamespaceLabel: {key: '', value: ''}}")
	if v := a.create(t, policyPod("exempt-by-label", "plain"), tenant); v.admitted() {
		t.Errorf("exemptNamespaceLabel.key '': a pod in a namespace labelled %s=%s: %s, want it refused", policyExemptKey, policyExemptValue, v)
	}
}

// TestLimitPolicyLetsBuiltInControllersReplacePods (issue 37, item 5): under Deny, in the API
// server's own admission code, what kube-controller-manager's built-in controllers make from a
// workload's template (pods, a Deployment's ReplicaSets, a CronJob's Jobs) is admitted, so a
// workload older than the policy keeps replacing its pods; its template is checked when it is
// written instead. The controllers are known by the user the API server authenticated, which
// no tenant can be: the same pod, ownerReferences and all, created by a tenant, by a service
// account of the same name in the tenant's namespace, or by another of kube-system's, is
// refused. With workloads: false the pods are the only check, whoever makes them.
func TestLimitPolicyLetsBuiltInControllersReplacePods(t *testing.T) {
	a := limitPolicyAdmitter(t, "limitPolicy: {enabled: true, validationActions: [Deny]}")
	rsPod := policyPod("shop", "web-5d4f8-x2k5q", ownedBy("apps/v1", "ReplicaSet", "web-5d4f8"))
	for _, tc := range []struct {
		what string
		obj  runtime.Object
		by   user.Info
	}{
		{"a ReplicaSet's pod, by the replicaset-controller", rsPod, controller("replicaset-controller")},
		{"a ReplicationController's pod, by the replication-controller", policyPod("shop", "rc-x2k5q", ownedBy("v1", "ReplicationController", "rc")), controller("replication-controller")},
		{"a StatefulSet's pod, by the statefulset-controller", policyPod("shop", "db-0", ownedBy("apps/v1", "StatefulSet", "db")), controller("statefulset-controller")},
		{"a DaemonSet's pod, by the daemon-set-controller", policyPod("shop", "agent-x2k5q", ownedBy("apps/v1", "DaemonSet", "agent")), controller("daemon-set-controller")},
		{"a Job's pod, by the job-controller", policyPod("shop", "batch-x2k5q", ownedBy("batch/v1", "Job", "batch")), controller("job-controller")},
		{"a Deployment's ReplicaSet, by the deployment-controller", policyReplicaSet("shop", "web-5d4f8"), controller("deployment-controller")},
		{"a CronJob's Job, by the cronjob-controller", policyJob("shop", "nightly-29000000"), controller("cronjob-controller")},
		{"a ReplicaSet's pod, by kube-controller-manager's own user", rsPod, &user.DefaultInfo{Name: user.KubeControllerManager}},
	} {
		if v := a.create(t, tc.obj, tc.by); !v.admitted() {
			t.Errorf("Deny: %s: %s, want it admitted (its template was checked when written, or predates the policy)", tc.what, v)
		}
	}
	for _, tc := range []struct {
		what string
		obj  runtime.Object
		by   user.Info
	}{
		{"a pod owned by a ReplicaSet (as the tenant writes it), by the tenant", rsPod, tenant},
		{"the same, by the tenant's service account named replicaset-controller", rsPod, serviceAccountUser("shop", "replicaset-controller")},
		{"the same, by a user named replicaset-controller", rsPod, &user.DefaultInfo{Name: "replicaset-controller"}},
		{"the same, by kube-system's default service account", rsPod, serviceAccountUser("kube-system", "default")},
		{"a ReplicaSet, by the tenant", policyReplicaSet("shop", "web-5d4f8"), tenant},
		{"a Job, by the tenant", policyJob("shop", "batch"), tenant},
		{"a Deployment, by the tenant", policyDeployment("shop", "web"), tenant},
	} {
		if v := a.create(t, tc.obj, tc.by); v.admitted() || !strings.Contains(v.err.Error(), flaggedMessage) {
			t.Errorf("Deny: %s: %s, want it refused with %q", tc.what, v, flaggedMessage)
		}
	}
	// An old Deployment: scaled, admitted; its template changed (a rollout restart), refused.
	old := policyDeployment("shop", "web")
	scaled := old.DeepCopy()
	scaled.Spec.Replicas = ptr.To[int32](5)
	if v := a.update(t, scaled, old, tenant); !v.admitted() {
		t.Errorf("Deny: scaling a Deployment older than the policy: %s, want it admitted", v)
	}
	restarted := old.DeepCopy()
	restarted.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now"}
	if v := a.update(t, restarted, old, tenant); v.admitted() {
		t.Errorf("Deny: restarting a Deployment older than the policy (its template changes): %s, want it refused", v)
	}

	// workloads: false checks pods only, so whoever makes them.
	a = limitPolicyAdmitter(t, "limitPolicy: {enabled: true, validationActions: [Deny], workloads: false}")
	if v := a.create(t, rsPod, controller("replicaset-controller")); v.admitted() {
		t.Errorf("Deny, workloads false: a ReplicaSet's pod by the replicaset-controller: %s, want it refused (no template is checked)", v)
	}
}

// TestPolicyCheckListsWhatDenyRefuses: `kubectl emptydir policy-check`, the check to run before
// switching to Deny, lists exactly what the API server's admission code, with the chart's
// policy under Deny, refuses next of each object of a cluster, for the chart's defaults and
// each value that changes what is checked. The next of an object is what happens to it
// anyway: for a workload its template's next change (by the tenant), for what a built-in
// controller made (a ReplicaSet's pod, a Deployment's ReplicaSet) its re-creation by that
// controller, for any other pod the next one like it (by its creator, a tenant or an
// operator's service account). And for what it lists it names what the message names.
func TestPolicyCheckListsWhatDenyRefuses(t *testing.T) {
	operator := serviceAccountUser("argo", "argo-workflow-controller")
	partial := func(p *corev1.Pod) { // only the init container lacks its limit
		withContainerLimits(p)
		withSizeLimits(p)
		p.Spec.InitContainers[0].Resources = corev1.ResourceRequirements{}
	}
	type next struct {
		obj runtime.Object
		do  func(a *admitter) verdict
	}
	// templateChange: the tenant annotates the template of obj (tmpl finds it), as kubectl
	// rollout restart does.
	templateChange := func(obj runtime.Object, tmpl func(runtime.Object) *corev1.PodTemplateSpec) func(*admitter) verdict {
		return func(a *admitter) verdict {
			changed := obj.DeepCopyObject()
			tmpl(changed).Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now"}
			return a.update(t, changed, obj, tenant)
		}
	}
	createdBy := func(obj runtime.Object, u user.Info) func(*admitter) verdict {
		return func(a *admitter) verdict { return a.create(t, obj, u) }
	}
	var cluster []next
	for _, ns := range []string{"shop", "exempt-by-label", "guard", "kube-system"} {
		web := policyDeployment(ns, "web")
		webRS := policyReplicaSet(ns, "web-5d4f8")
		webRS.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "uid-of-web", Controller: ptr.To(true)}}
		webPod := policyPod(ns, "web-5d4f8-x2k5q", ownedBy("apps/v1", "ReplicaSet", "web-5d4f8"))
		api := policyDeployment(ns, "api", withContainerLimits, withSizeLimits)
		apiPod := policyPod(ns, "api-7c9-abcde", ownedBy("apps/v1", "ReplicaSet", "api-7c9"), withContainerLimits, withSizeLimits)
		db := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: appsv1.StatefulSetSpec{Template: template(policyPod(ns, "db", partial))}}
		dbPod := policyPod(ns, "db-0", ownedBy("apps/v1", "StatefulSet", "db"), partial)
		agent := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"}, Spec: appsv1.DaemonSetSpec{Template: template(policyPod(ns, "agent"))}}
		agentPod := policyPod(ns, "agent-x2k5q", ownedBy("apps/v1", "DaemonSet", "agent"))
		nightlyJob := policyJob(ns, "nightly-29000000")
		nightlyJob.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: "uid-of-nightly", Controller: ptr.To(true)}}
		nightly := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
			Spec: batchv1.CronJobSpec{Schedule: "0 0 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: nightlyJob.Spec}}}
		nightlyPod := policyPod(ns, "nightly-29000000-abcde", ownedBy("batch/v1", "Job", "nightly-29000000"))
		once := policyJob(ns, "once")
		oncePod := policyPod(ns, "once-abcde", ownedBy("batch/v1", "Job", "once"))
		rc := &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy"},
			Spec: corev1.ReplicationControllerSpec{Template: ptr.To(template(policyPod(ns, "legacy")))}}
		rcPod := policyPod(ns, "legacy-x2k5q", ownedBy("v1", "ReplicationController", "legacy"))
		debug := policyPod(ns, "debug")
		build := policyPod(ns, "build-1", ownedBy("argoproj.io/v1alpha1", "Workflow", "build"))
		deploymentTemplate := func(o runtime.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.Deployment).Spec.Template }
		cluster = append(cluster,
			next{web, templateChange(web, deploymentTemplate)},
			next{webRS, createdBy(webRS, controller("deployment-controller"))},
			next{webPod, createdBy(webPod, controller("replicaset-controller"))},
			next{api, templateChange(api, deploymentTemplate)},
			next{apiPod, createdBy(apiPod, controller("replicaset-controller"))},
			next{db, templateChange(db, func(o runtime.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.StatefulSet).Spec.Template })},
			next{dbPod, createdBy(dbPod, controller("statefulset-controller"))},
			next{agent, templateChange(agent, func(o runtime.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.DaemonSet).Spec.Template })},
			next{agentPod, createdBy(agentPod, controller("daemon-set-controller"))},
			next{nightly, templateChange(nightly, func(o runtime.Object) *corev1.PodTemplateSpec {
				return &o.(*batchv1.CronJob).Spec.JobTemplate.Spec.Template
			})},
			next{nightlyJob, createdBy(nightlyJob, controller("cronjob-controller"))},
			next{nightlyPod, createdBy(nightlyPod, controller("job-controller"))},
			next{once, templateChange(once, func(o runtime.Object) *corev1.PodTemplateSpec { return &o.(*batchv1.Job).Spec.Template })},
			next{oncePod, createdBy(oncePod, controller("job-controller"))},
			next{rc, templateChange(rc, func(o runtime.Object) *corev1.PodTemplateSpec { return o.(*corev1.ReplicationController).Spec.Template })},
			next{rcPod, createdBy(rcPod, controller("replication-controller"))},
			next{debug, createdBy(debug, tenant)},
			next{build, createdBy(build, operator)},
		)
	}
	namespaces := []*corev1.Namespace{
		namespace("shop", map[string]string{"team": "shop"}),
		namespace("exempt-by-label", map[string]string{policyExemptKey: policyExemptValue}),
		namespace("guard", nil),
		namespace("kube-system", nil),
	}
	for _, tc := range []struct {
		values string
		// olderChart drops the matchConditions, as the chart rendered the policy before it
		// left the built-in controllers out: the check reads an installed policy of any age.
		olderChart bool
	}{
		{values: "limitPolicy: {enabled: true, validationActions: [Deny]}"},
		{values: "limitPolicy: {enabled: true, validationActions: [Deny]}", olderChart: true},
		{values: "limitPolicy: {enabled: true, validationActions: [Deny], workloads: false}"},
		{values: "limitPolicy: {enabled: true, validationActions: [Deny], checks: {sizeLimit: false}}"},
		{values: "limitPolicy: {enabled: true, validationActions: [Deny], checks: {ephemeralStorage: false}, excludedNamespaces: []}"},
	} {
		name := tc.values
		if tc.olderChart {
			name += " (an older chart's policy)"
		}
		t.Run(name, func(t *testing.T) {
			r := release("guard")
			if err := yaml.Unmarshal([]byte(tc.values), &r.Values); err != nil {
				t.Fatal(err)
			}
			rendered := render(t, r)
			if tc.olderChart {
				p, _ := limitPolicy(t, rendered)
				p.Spec.MatchConditions = nil
			}
			a := newAdmitter(t, rendered, namespaces...)
			objs := []runtime.Object{}
			for _, ns := range namespaces {
				objs = append(objs, ns)
			}
			p, b := limitPolicy(t, rendered)
			objs = append(objs, p, b)
			for _, n := range cluster {
				objs = append(objs, n.obj)
			}
			client := kubefake.NewClientset(objs...)
			policy, err := plugin.ReadLimitPolicy(t.Context(), client, "")
			if err != nil {
				t.Fatal(err)
			}
			items, err := plugin.PolicyCheck(t.Context(), client, policy, "")
			if err != nil {
				t.Fatal(err)
			}
			listed := map[string]plugin.PolicyCheckItem{}
			for _, i := range items {
				listed[i.Namespace+"/"+i.Kind+"/"+i.Name] = i
			}
			refused := 0
			for _, n := range cluster {
				m, _ := meta.Accessor(n.obj)
				kinds, _, _ := clientgoscheme.Scheme.ObjectKinds(n.obj)
				key := m.GetNamespace() + "/" + kinds[0].Kind + "/" + m.GetName()
				item, isListed := listed[key]
				v := n.do(a)
				if v.admitted() == isListed {
					t.Errorf("%s: its next %s; the check lists it: %v", key, v, isListed)
					continue
				}
				if !isListed {
					continue
				}
				refused++
				want := ""
				if len(item.VolumesWithoutSizeLimit) > 0 {
					want += "emptyDir volumes without a sizeLimit: " + strings.Join(item.VolumesWithoutSizeLimit, ", ") + ". "
				}
				if len(item.ContainersWithoutEphemeralStorageLimit) > 0 {
					want += "containers without an ephemeral-storage limit: " + strings.Join(item.ContainersWithoutEphemeralStorageLimit, ", ") + ". "
				}
				if !strings.Contains(v.err.Error(), "denied request: "+want+"Set them") {
					t.Errorf("%s: the check says it misses %q; its next is %s", key, item.Missing(), v)
				}
			}
			if refused == 0 || refused != len(items) {
				t.Errorf("%d refused, %d listed: want some, and nothing listed outside the cluster's objects", refused, len(items))
			}
			if !t.Failed() {
				t.Logf("%d objects, %d of whose next Deny refuses, each listed by the check", len(cluster), refused)
			}
		})
	}
}

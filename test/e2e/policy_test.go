package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// The chart's limitPolicy defaults the test relies on (values.yaml): the Namespace label that
// exempts, and the page the message names.
const (
	policyExemptKey   = "emptydir-guard.io/limits-policy"
	policyExemptValue = "exempt"
	policyDocs        = "docs/policy.md"
)

// TestLimitPolicyOnRealAPIServer applies the chart's ValidatingAdmissionPolicy and binding
// (limitPolicy, rendered with `helm template`) to the real API server and creates pods and
// workloads against it, as a user would:
//   - Warn and Audit, the defaults when enabled: a pod missing a sizeLimit and ephemeral-storage
//     limits is created, its response carries the message as a warning (client-go's
//     WarningHandler), the API server's audit log has the validation_failure annotation, and a
//     Deployment or CronJob with such a template warns at its own creation;
//   - the exemptions pass without either: the release namespace, kube-system, a namespace
//     labelled with the exemption, a memory emptyDir, a pod with every limit; a pod labelled
//     and annotated with the exemption itself is no exemption (its author is the tenant);
//   - Deny (and the release namespace checked): the same pod and Deployment are refused with
//     the message, and so is a pod labelled exempt; the chart's own exporter DaemonSet and
//     remediator Deployment, and pods made from their templates, are admitted; what the policy
//     must not block is admitted (an update of an old pod, an update leaving a workload's
//     template as it was, an ephemeral container, a ReplicaSet's pod made by the
//     replicaset-controller's user), while a change of that template is refused, and so is the
//     same ReplicaSet's pod, ownerReferences and all, made by anyone else.
//
// No pod here runs: none has a node (no scheduler runs), so only admission is exercised.
func TestLimitPolicyOnRealAPIServer(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 5*time.Minute)
	defer cancel()

	guardNS := framework.Namespace(ctx, t, c, "policy-guard") // the release's namespace
	shopNS := framework.Namespace(ctx, t, c, "policy-shop")
	exemptNS := framework.Namespace(ctx, t, c, "policy-exempt") // labelled exempt, as a cluster admin would
	if _, err := c.Client().CoreV1().Namespaces().Patch(ctx, exemptNS, types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, policyExemptKey, policyExemptValue), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureNamespace(ctx, "kube-system"); err != nil {
		t.Fatal(err)
	}
	warned := &warningRecorder{}
	rc := c.RESTConfig()
	rc.WarningHandler = warned
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	p := &policyEnv{c: c, client: client, warned: warned, shopNS: shopNS}
	// Runs last: the other tests share this API server, so they must not start while it
	// still holds the policy (it learns of the deletion through a watch).
	t.Cleanup(func() {
		p.waitPolicy(t, "removed", func(err error, warnings []string) bool { return err == nil && len(warnings) == 0 })
	})

	// Warn and Audit.
	objs := helmTemplate(t, "policy", guardNS, "limitPolicy: {enabled: true}\n")
	name := policyObjects(t, objs, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn, admissionregistrationv1.Audit})
	deployApply(ctx, t, c, policyOnly(objs))
	p.waitPolicy(t, "in force (Warn)", func(err error, warnings []string) bool { return err == nil && len(warnings) > 0 })

	flaggedMessage := "emptyDir volumes without a sizeLimit: cache, zero. containers without an ephemeral-storage limit: init, sidecar, app. "
	legacy := p.create(t, policyPod(shopNS, "no-limits"))
	if w := warned.take(); len(w) != 1 || !strings.Contains(w[0], flaggedMessage) || !strings.Contains(w[0], policyDocs) ||
		!strings.Contains(w[0], fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s'", name, name)) {
		t.Errorf("Warn: creating the pod without limits warned %q, want one warning saying %q and %s", w, flaggedMessage, policyDocs)
	} else {
		t.Logf("Warn: the pod without limits is created, with the warning %q", w[0])
	}
	p.checkAudit(t, "pods", shopNS, "no-limits", name, flaggedMessage)
	// A pod's own label and annotation exempt nothing: the tenant writes them.
	p.create(t, policyPod(shopNS, "self-exempt", selfExempt))
	if w := warned.take(); len(w) != 1 || !strings.Contains(w[0], flaggedMessage) {
		t.Errorf("Warn: creating a pod without limits labelled and annotated exempt warned %q, want %q", w, flaggedMessage)
	}

	exempt := []struct {
		what string
		pod  *corev1.Pod
	}{
		{"in the release namespace", policyPod(guardNS, "no-limits")},
		{"in kube-system", policyPod("kube-system", "policy-no-limits-"+framework.RandSuffix())},
		{"in a namespace labelled exempt", policyPod(exemptNS, "no-limits")},
		{"with a memory emptyDir without a sizeLimit, every container limited", policyPod(shopNS, "memory", withContainerLimits, func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}}
		})},
		{"with every limit", policyPod(shopNS, "every-limit", withContainerLimits, withSizeLimits)},
	}
	for _, e := range exempt {
		p.create(t, e.pod)
		if w := warned.take(); len(w) > 0 {
			t.Errorf("the pod %s: warned %q, want no warning", e.what, w)
		}
		p.checkAudit(t, "pods", e.pod.Namespace, e.pod.Name, name, "")
	}

	// A workload's template is checked at the workload's creation, where kubectl shows it.
	legacyDeploy := p.createDeployment(t, policyDeployment(shopNS, "no-limits"))
	if w := warned.take(); len(w) != 1 || !strings.Contains(w[0], flaggedMessage) {
		t.Errorf("Warn: creating a Deployment whose template lacks limits warned %q, want %q", w, flaggedMessage)
	} else {
		t.Logf("Warn: the Deployment without limits is created, with the warning %q", w[0])
	}
	p.checkAudit(t, "deployments", shopNS, "no-limits", name, flaggedMessage)
	// A CronJob's template is one level deeper (spec.jobTemplate.spec.template).
	p.createCronJob(t, policyCronJob(shopNS, "no-limits"))
	if w := warned.take(); len(w) != 1 || !strings.Contains(w[0], flaggedMessage) {
		t.Errorf("Warn: creating a CronJob whose template lacks limits warned %q, want %q", w, flaggedMessage)
	}
	p.createCronJob(t, policyCronJob(shopNS, "every-limit", withContainerLimits, withSizeLimits))
	if w := warned.take(); len(w) > 0 {
		t.Errorf("creating a CronJob with every limit warned %q, want no warning", w)
	}

	// Deny, with the release namespace checked too, where the chart's own workloads go.
	objs = helmTemplate(t, "policy", guardNS, `
image:
  repository: localhost/emptydir-guard
  tag: test
limitPolicy: {enabled: true, validationActions: [Deny], excludeReleaseNamespace: false}
`)
	policyObjects(t, objs, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny})
	deployApply(ctx, t, c, policyOnly(objs))
	p.waitPolicy(t, "in force (Deny)", func(err error, _ []string) bool { return apierrors.IsInvalid(err) })

	denied := fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", name, name, flaggedMessage)
	_, err = client.CoreV1().Pods(shopNS).Create(ctx, policyPod(shopNS, "no-limits-denied"), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), denied) || !strings.Contains(err.Error(), policyDocs) {
		t.Errorf("Deny: creating the pod without limits: %v, want it refused (Invalid) with %q and %s", err, denied, policyDocs)
	} else {
		t.Logf("Deny: the pod without limits is refused: %v", err)
	}
	_, err = client.AppsV1().Deployments(shopNS).Create(ctx, policyDeployment(shopNS, "no-limits-denied"), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), denied) {
		t.Errorf("Deny: creating a Deployment whose template lacks limits: %v, want it refused with %q", err, denied)
	}
	p.create(t, policyPod(shopNS, "every-limit-deny", withContainerLimits, withSizeLimits))
	p.create(t, policyPod(exemptNS, "no-limits-deny"))
	_, err = client.CoreV1().Pods(shopNS).Create(ctx, policyPod(shopNS, "self-exempt-deny", selfExempt), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), denied) {
		t.Errorf("Deny: creating a pod without limits labelled and annotated exempt: %v, want it refused with %q", err, denied)
	}

	// A workload older than the policy keeps replacing its pods: what the replicaset-controller
	// makes is admitted, known by the user the API server authenticated (impersonated here; in
	// system:masters only so that RBAC lets each user create pods), never by ownerReferences.
	rsPod := func(name string) *corev1.Pod {
		return policyPod(shopNS, name, func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: legacyDeploy.Name + "-5d4f8",
				UID: "00000000-0000-0000-0000-000000000001", Controller: ptr.To(true)}}
		})
	}
	for _, tc := range []struct {
		user  string
		admit bool
	}{
		{"system:serviceaccount:kube-system:replicaset-controller", true},
		{"system:kube-controller-manager", true},
		{"system:serviceaccount:" + shopNS + ":replicaset-controller", false},
		{"system:serviceaccount:kube-system:default", false},
	} {
		rc := c.RESTConfig()
		rc.Impersonate = rest.ImpersonationConfig{UserName: tc.user, Groups: []string{"system:masters", "system:authenticated"}}
		as, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		pod := rsPod("replaced-" + framework.RandSuffix())
		_, err = as.CoreV1().Pods(shopNS).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case tc.admit && err != nil:
			t.Errorf("Deny: a ReplicaSet's pod without limits made by %s: %v, want it admitted", tc.user, err)
		case !tc.admit && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), denied)):
			t.Errorf("Deny: a pod without limits with a ReplicaSet's ownerReferences made by %s: %v, want it refused with %q", tc.user, err, denied)
		}
	}
	if _, err := client.CoreV1().Pods(shopNS).Create(ctx, rsPod("forged-owner"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsInvalid(err) {
		t.Errorf("Deny: a pod without limits with a ReplicaSet's ownerReferences made by the test's user: %v, want it refused", err)
	}

	// What the policy must not block: changes that add no pod without limits.
	if _, err := client.CoreV1().Pods(shopNS).Patch(ctx, legacy.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("Deny: labelling a pod created before (pods are checked at creation only): %v", err)
	}
	if _, err := client.AppsV1().Deployments(shopNS).Patch(ctx, legacyDeploy.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}},"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("Deny: scaling and labelling a Deployment created before, its template unchanged: %v", err)
	}
	_, err = client.AppsV1().Deployments(shopNS).Patch(ctx, legacyDeploy.Name, types.MergePatchType, []byte(`{"spec":{"template":{"metadata":{"annotations":{"restartedAt":"now"}}}}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), denied) {
		t.Errorf("Deny: changing the template of a Deployment without limits (a rollout restart): %v, want it refused with %q", err, denied)
	}
	debugged, err := client.CoreV1().Pods(shopNS).Get(ctx, "every-limit-deny", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	debugged.Spec.EphemeralContainers = append(debugged.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: cluster.BusyboxImage, TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullNever}})
	if _, err := client.CoreV1().Pods(shopNS).UpdateEphemeralContainers(ctx, debugged.Name, debugged, metav1.UpdateOptions{}); err != nil {
		t.Errorf("Deny: adding an ephemeral container (kubectl debug), which cannot have limits: %v", err)
	}

	// The project's own: every object of the chart (ServiceAccounts first: pods need theirs),
	// then a pod from each of its two templates, as their controllers would make them.
	deployApply(ctx, t, c, objs)
	for _, o := range objs {
		var tmpl *corev1.PodTemplateSpec
		switch w := o.(type) {
		case *appsv1.DaemonSet:
			tmpl = &w.Spec.Template
		case *appsv1.Deployment:
			tmpl = &w.Spec.Template
		default:
			continue
		}
		pod := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
		pod.Namespace, pod.Name = guardNS, o.(metav1.Object).GetName()+"-"+framework.RandSuffix()
		p.create(t, pod)
		t.Logf("Deny: the chart's %s %s and a pod from its template are admitted", o.GetObjectKind().GroupVersionKind().Kind, o.(metav1.Object).GetName())
	}
}

// policyEnv is what the steps of TestLimitPolicyOnRealAPIServer share.
type policyEnv struct {
	c      *cluster.Cluster
	client kubernetes.Interface // records its warnings in warned
	warned *warningRecorder
	shopNS string // a namespace the policy checks
}

// waitPolicy waits until creating a pod without limits (dry run, so nothing is made) gives
// what done accepts. The API server loads a new policy or binding through a watch and compiles
// it, so there is a short while after the apply when it is not in force; the policy's
// status.typeChecking would not say when it is (the controller that writes it runs in
// kube-controller-manager, which this cluster does not run, and it is about types anyway).
func (p *policyEnv) waitPolicy(t *testing.T, what string, done func(err error, warnings []string) bool) {
	t.Helper()
	t0 := time.Now()
	framework.Eventually(t, time.Minute, 200*time.Millisecond, "the limit policy "+what, func() (bool, string) {
		_, err := p.client.CoreV1().Pods(p.shopNS).Create(context.Background(), policyPod(p.shopNS, "probe"),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		w := p.warned.take()
		return done(err, w), fmt.Sprintf("a pod without limits: err %v, warnings %q", err, w)
	})
	t.Logf("the limit policy is %s after %s", what, time.Since(t0).Round(time.Millisecond))
}

// create creates pod, which must be admitted, and deletes it when the test ends.
func (p *policyEnv) create(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	created, err := p.client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	t.Cleanup(func() {
		if err := p.c.Client().CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting pod %s/%s: %v", pod.Namespace, pod.Name, err)
		}
	})
	return created
}

// createDeployment creates d (no controller runs, so it makes no pods) and deletes it when
// the test ends.
func (p *policyEnv) createDeployment(t *testing.T, d *appsv1.Deployment) *appsv1.Deployment {
	t.Helper()
	created, err := p.client.AppsV1().Deployments(d.Namespace).Create(context.Background(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Deployment %s/%s: %v", d.Namespace, d.Name, err)
	}
	t.Cleanup(func() {
		if err := p.c.Client().AppsV1().Deployments(d.Namespace).Delete(context.Background(), d.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting Deployment %s/%s: %v", d.Namespace, d.Name, err)
		}
	})
	return created
}

// createCronJob creates cj (no controller runs, so it makes no jobs) and deletes it when the
// test ends.
func (p *policyEnv) createCronJob(t *testing.T, cj *batchv1.CronJob) {
	t.Helper()
	if _, err := p.client.BatchV1().CronJobs(cj.Namespace).Create(context.Background(), cj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating CronJob %s/%s: %v", cj.Namespace, cj.Name, err)
	}
	t.Cleanup(func() {
		if err := p.c.Client().BatchV1().CronJobs(cj.Namespace).Delete(context.Background(), cj.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting CronJob %s/%s: %v", cj.Namespace, cj.Name, err)
		}
	})
}

// checkAudit finds the audit event of the creation of resource ns/name and checks its
// ValidatingAdmissionPolicy annotation: a failure of policy with message in it, or, with
// message "", none.
func (p *policyEnv) checkAudit(t *testing.T, resource, ns, name, policy, message string) {
	t.Helper()
	var ev *auditEvent
	// The API server writes the event once the response is sent.
	framework.Eventually(t, 10*time.Second, 100*time.Millisecond, fmt.Sprintf("the audit event of the creation of %s %s/%s", resource, ns, name), func() (bool, string) {
		var err error
		ev, err = findAuditEvent(p.c.AuditLogPath(), resource, ns, name)
		return ev != nil, fmt.Sprint(err)
	})
	raw, found := ev.Annotations["validation.policy.admission.k8s.io/validation_failure"]
	if message == "" {
		if found {
			t.Errorf("audit log: the creation of %s %s/%s has the validation failure %s, want none", resource, ns, name, raw)
		}
		return
	}
	var failures []struct {
		Message           string   `json:"message"`
		Policy            string   `json:"policy"`
		ValidationActions []string `json:"validationActions"`
	}
	if err := json.Unmarshal([]byte(raw), &failures); err != nil || len(failures) != 1 {
		t.Errorf("audit log: the creation of %s %s/%s: validation_failure %q (%v), want one failure", resource, ns, name, raw, err)
		return
	}
	f := failures[0]
	if f.Policy != policy || !strings.Contains(f.Message, message) || !slices.Contains(f.ValidationActions, "Audit") {
		t.Errorf("audit log: the creation of %s %s/%s: failure %+v, want policy %s, actions with Audit, a message with %q", resource, ns, name, f, policy, message)
		return
	}
	t.Logf("Audit: the audit log's event of the creation of %s %s/%s carries validation_failure %s", resource, ns, name, raw)
}

// auditEvent is the part of an audit.k8s.io/v1 Event the test reads.
type auditEvent struct {
	Verb       string `json:"verb"`
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	ObjectRef  struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	Annotations map[string]string `json:"annotations"`
}

// findAuditEvent is the last completed, not dry-run, creation of resource ns/name in the
// audit log at path, or nil.
func findAuditEvent(path, resource, ns, name string) (*auditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var found *auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		r := ev.ObjectRef
		if ev.Verb == "create" && ev.Stage == "ResponseComplete" && r.Resource == resource && r.Subresource == "" &&
			r.Namespace == ns && r.Name == name && !strings.Contains(ev.RequestURI, "dryRun") {
			found = &ev
		}
	}
	return found, sc.Err()
}

// warningRecorder keeps the warnings the API server sends (rest.WarningHandler).
type warningRecorder struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

// take returns the warnings received since the last take.
func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	got := w.warnings
	w.warnings = nil
	return got
}

// policyPod is a pod the limit policy flags on every count unless options change it: an init
// container (init) and a restartable one (sidecar) without an ephemeral-storage limit, a
// container (app) whose limit is 0, a disk emptyDir without a sizeLimit (cache) and one whose
// sizeLimit is 0 (zero): the kubelet enforces neither 0.
func policyPod(ns, name string, options ...func(*corev1.Pod)) *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	ctr := func(name string) corev1.Container {
		return corev1.Container{Name: name, Image: cluster.BusyboxImage, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "3600"}}
	}
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
			},
		},
	}
	for _, o := range options {
		o(p)
	}
	return p
}

// withContainerLimits gives every container an ephemeral-storage limit (and a request of 0,
// which a kubelet without local storage capacity isolation admits).
func withContainerLimits(p *corev1.Pod) {
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			cs[i].Resources = corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("64Mi")},
				Requests: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("0")},
			}
		}
	}
}

// selfExempt labels and annotates the pod with the exemption, as a tenant may.
func selfExempt(p *corev1.Pod) {
	p.Labels = map[string]string{policyExemptKey: policyExemptValue}
	p.Annotations = map[string]string{policyExemptKey: policyExemptValue}
}

// withSizeLimits gives every emptyDir a sizeLimit of 16Mi.
func withSizeLimits(p *corev1.Pod) {
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil {
			limit := resource.MustParse("16Mi")
			v.EmptyDir.SizeLimit = &limit
		}
	}
}

// policyDeployment is a Deployment of policyPod's template (no limits at all).
func policyDeployment(ns, name string) *appsv1.Deployment {
	pod := policyPod(ns, name)
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
		},
	}
}

// policyCronJob is a CronJob of policyPod's template with the options.
func policyCronJob(ns, name string, options ...func(*corev1.Pod)) *batchv1.CronJob {
	pod := policyPod(ns, name, options...)
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.CronJobSpec{
			Schedule: "0 0 1 1 *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Template: corev1.PodTemplateSpec{Spec: pod.Spec},
			}},
		},
	}
}

// policyOnly are the limit policy's objects among objs.
func policyOnly(objs []runtime.Object) []runtime.Object {
	var out []runtime.Object
	for _, o := range objs {
		switch o.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			out = append(out, o)
		}
	}
	return out
}

// policyObjects checks that objs hold one policy and one binding of it with the actions, and
// returns their name.
func policyObjects(t *testing.T, objs []runtime.Object, actions []admissionregistrationv1.ValidationAction) string {
	t.Helper()
	var policies, bindings []string
	for _, o := range objs {
		switch v := o.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			policies = append(policies, v.Name)
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			bindings = append(bindings, v.Spec.PolicyName)
			if !slices.Equal(v.Spec.ValidationActions, actions) {
				t.Fatalf("the binding's actions %v, want %v", v.Spec.ValidationActions, actions)
			}
		}
	}
	if len(policies) != 1 || !slices.Equal(policies, bindings) {
		t.Fatalf("the chart renders policies %v and bindings of %v, want one of each", policies, bindings)
	}
	return policies[0]
}

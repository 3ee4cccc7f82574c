package plugin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/emptydir-guard/emptydir-guard/deploy"
)

// componentPolicy is the kustomize component's limit policy and binding (the chart's, with
// its defaults: both checks, workloads, the built-in controllers left out; kube-system,
// emptydir-guard and the namespaces labelled exempt excluded), with change applied.
func componentPolicy(t *testing.T, change func(*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding)) []runtime.Object {
	t.Helper()
	b, err := deploy.Files.ReadFile("components/limit-policy/limitpolicy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := deploy.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	vap, ok := deploy.Find[*admissionregistrationv1.ValidatingAdmissionPolicy](objs, "emptydir-limits")
	binding, ok2 := deploy.Find[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](objs, "emptydir-limits")
	if !ok || !ok2 {
		t.Fatalf("the component has no policy and binding emptydir-limits: %v", objs)
	}
	if change != nil {
		change(vap, binding)
	}
	return []runtime.Object{vap, binding}
}

func checkNamespace(name string, labels map[string]string) *corev1.Namespace {
	l := map[string]string{corev1.LabelMetadataName: name}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

// unlimited is a pod spec without any limit: an init container and a container without an
// ephemeral-storage limit, a disk emptyDir without a sizeLimit, a memory one (never asked).
func unlimited() corev1.PodSpec {
	return corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init"}},
		Containers:     []corev1.Container{{Name: "app"}},
		Volumes: []corev1.Volume{
			{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "ram", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		},
	}
}

// limited is unlimited with every limit.
func limited() corev1.PodSpec {
	s := unlimited()
	q := resource.MustParse("1Gi")
	s.Volumes[0].EmptyDir.SizeLimit = &q
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			cs[i].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: q}
		}
	}
	return s
}

func meta(ns, name string, owner ...string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: ns, Name: name}
	if len(owner) == 3 {
		m.OwnerReferences = []metav1.OwnerReference{{APIVersion: owner[0], Kind: owner[1], Name: owner[2], Controller: ptr(true)}}
	}
	return m
}

// checkCluster: namespaces shop (checked), exempt (labelled so), emptydir-guard (the
// release's); in shop a Deployment without limits, its ReplicaSet and pod, one with them, a
// bare pod without limits, an operator's pod without them, a CronJob without them and its Job,
// a StatefulSet whose init container lacks its limit; the same Deployment in exempt and
// emptydir-guard.
func checkCluster(policy []runtime.Object) *fake.Clientset {
	objs := append([]runtime.Object{
		checkNamespace("shop", nil),
		checkNamespace("exempt", map[string]string{"emptydir-guard.io/limits-policy": "exempt"}),
		checkNamespace("emptydir-guard", nil),
	}, policy...)
	for _, ns := range []string{"shop", "exempt", "emptydir-guard"} {
		objs = append(objs,
			&appsv1.Deployment{ObjectMeta: meta(ns, "web"), Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: unlimited()}}},
			&appsv1.ReplicaSet{ObjectMeta: meta(ns, "web-5d4f8", "apps/v1", "Deployment", "web"), Spec: appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{Spec: unlimited()}}},
			&corev1.Pod{ObjectMeta: meta(ns, "web-5d4f8-x2k5q", "apps/v1", "ReplicaSet", "web-5d4f8"), Spec: unlimited()})
	}
	sts := unlimited()
	sts.InitContainers[0].Resources.Limits = nil
	sts.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
	q := resource.MustParse("1Gi")
	sts.Volumes[0].EmptyDir.SizeLimit = &q
	return fake.NewClientset(append(objs,
		&appsv1.Deployment{ObjectMeta: meta("shop", "api"), Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: limited()}}},
		&corev1.Pod{ObjectMeta: meta("shop", "api-7c9-abcde", "apps/v1", "ReplicaSet", "api-7c9"), Spec: limited()},
		&corev1.Pod{ObjectMeta: meta("shop", "debug"), Spec: unlimited()},
		&corev1.Pod{ObjectMeta: meta("shop", "build-1", "argoproj.io/v1alpha1", "Workflow", "build"), Spec: unlimited()},
		&batchv1.CronJob{ObjectMeta: meta("shop", "nightly"), Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: unlimited()}}}}},
		&batchv1.Job{ObjectMeta: meta("shop", "nightly-29000000", "batch/v1", "CronJob", "nightly"), Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: unlimited()}}},
		&corev1.Pod{ObjectMeta: meta("shop", "nightly-29000000-abcde", "batch/v1", "Job", "nightly-29000000"), Spec: unlimited()},
		&appsv1.StatefulSet{ObjectMeta: meta("shop", "db"), Spec: appsv1.StatefulSetSpec{Template: corev1.PodTemplateSpec{Spec: sts}}},
	)...)
}

func itemKeys(items []PolicyCheckItem) []string {
	var out []string
	for _, i := range items {
		out = append(out, i.Namespace+" "+i.Kind+"/"+i.Name+" "+i.Refused+" "+i.Missing())
	}
	return out
}

// TestPolicyCheck: with the component's policy, the check lists in the namespaces it checks
// the workloads whose template lacks a limit (their next template change is refused: a
// Deployment, a CronJob, a StatefulSet whose init container lacks its limit) and the pods
// that lack one and that no built-in controller remakes (a bare pod, an operator's), naming
// what is missing as the policy's message would; not a Deployment's ReplicaSet or its pods,
// a CronJob's Job or its pods, nor anything with every limit, in a namespace labelled exempt
// or in the release's. With workloads off every pod without its limits is listed and no
// workload; with a policy that checks the built-in controllers (an older chart's) their pods,
// ReplicaSets and Jobs too; with a check off, what only it asks for is not.
func TestPolicyCheck(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding)
		want   []string
	}{
		{"the component's", nil, []string{
			"shop CronJob/nightly template-change sizeLimit: cache; ephemeral-storage: init,app",
			"shop Deployment/web template-change sizeLimit: cache; ephemeral-storage: init,app",
			"shop Pod/build-1 re-creation sizeLimit: cache; ephemeral-storage: init,app",
			"shop Pod/debug re-creation sizeLimit: cache; ephemeral-storage: init,app",
			"shop StatefulSet/db template-change ephemeral-storage: init",
		}},
		{"an older chart's, which checks the built-in controllers", func(p *admissionregistrationv1.ValidatingAdmissionPolicy, _ *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.MatchConditions = nil
		}, []string{
			"shop CronJob/nightly template-change sizeLimit: cache; ephemeral-storage: init,app",
			"shop Deployment/web template-change sizeLimit: cache; ephemeral-storage: init,app",
			"shop Job/nightly-29000000 re-creation sizeLimit: cache; ephemeral-storage: init,app",
			"shop Pod/build-1 re-creation sizeLimit: cache; ephemeral-storage: init,app",
			"shop Pod/debug re-creation sizeLimit: cache; ephemeral-storage: init,app",
			"shop Pod/nightly-29000000-abcde re-creation sizeLimit: cache; ephemeral-storage: init,app",
			"shop Pod/web-5d4f8-x2k5q re-creation sizeLimit: cache; ephemeral-storage: init,app",
			"shop ReplicaSet/web-5d4f8 re-creation sizeLimit: cache; ephemeral-storage: init,app",
			"shop StatefulSet/db template-change ephemeral-storage: init",
		}},
		{"workloads off", func(p *admissionregistrationv1.ValidatingAdmissionPolicy, _ *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.MatchConstraints.ResourceRules = p.Spec.MatchConstraints.ResourceRules[:1]
			p.Spec.MatchConditions = nil
		}, []string{
			"shop Pod/build-1 re-creation sizeLimit: cache; ephemeral-storage: init,app",
			"shop Pod/debug re-creation sizeLimit: cache; ephemeral-storage: init,app",
			"shop Pod/nightly-29000000-abcde re-creation sizeLimit: cache; ephemeral-storage: init,app",
			"shop Pod/web-5d4f8-x2k5q re-creation sizeLimit: cache; ephemeral-storage: init,app",
		}},
		{"sizeLimit off", func(p *admissionregistrationv1.ValidatingAdmissionPolicy, _ *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			for i := range p.Spec.Variables {
				if p.Spec.Variables[i].Name == "withoutSizeLimit" {
					p.Spec.Variables[i].Expression = "[]"
				}
			}
		}, []string{
			"shop CronJob/nightly template-change ephemeral-storage: init,app",
			"shop Deployment/web template-change ephemeral-storage: init,app",
			"shop Pod/build-1 re-creation ephemeral-storage: init,app",
			"shop Pod/debug re-creation ephemeral-storage: init,app",
			"shop StatefulSet/db template-change ephemeral-storage: init",
		}},
		{"ephemeralStorage off, every namespace bound", func(p *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			for i := range p.Spec.Variables {
				if p.Spec.Variables[i].Name == "withoutEphemeralStorageLimit" {
					p.Spec.Variables[i].Expression = "[]"
				}
			}
			b.Spec.MatchResources.NamespaceSelector = nil
		}, []string{
			"emptydir-guard Deployment/web template-change sizeLimit: cache",
			"exempt Deployment/web template-change sizeLimit: cache",
			"shop CronJob/nightly template-change sizeLimit: cache",
			"shop Deployment/web template-change sizeLimit: cache",
			"shop Pod/build-1 re-creation sizeLimit: cache",
			"shop Pod/debug re-creation sizeLimit: cache",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := checkCluster(componentPolicy(t, tc.change))
			p, err := ReadLimitPolicy(ctx, client, "")
			if err != nil {
				t.Fatal(err)
			}
			items, err := PolicyCheck(ctx, client, p, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := itemKeys(items); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("listed\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
			for _, ns := range []string{"exempt", "emptydir-guard"} {
				if tc.change != nil {
					break
				}
				if items, err := PolicyCheck(ctx, client, p, ns); err != nil || len(items) != 0 {
					t.Errorf("namespace %s, which the binding leaves out: %v, %v, want nothing", ns, itemKeys(items), err)
				}
			}
		})
	}
}

// TestPolicyCheckFindsThePolicy: the policy is the one labelled as the chart labels it, or
// the one --policy names; none, several, one that is not the chart's, or one without a
// binding, is an error that says so.
func TestPolicyCheckFindsThePolicy(t *testing.T) {
	ctx := context.Background()
	policy := componentPolicy(t, nil)
	other := policy[0].(*admissionregistrationv1.ValidatingAdmissionPolicy).DeepCopy()
	other.Name = "team-limits"
	for _, tc := range []struct {
		name, policy string
		objs         []runtime.Object
		want         string // in the error; "" none
	}{
		{"labelled", "", policy, ""},
		{"named", "emptydir-limits", policy, ""},
		{"none", "", nil, "no ValidatingAdmissionPolicy labelled app.kubernetes.io/name=emptydir-limits"},
		{"several", "", append([]runtime.Object{other}, policy...), "several limit policies (emptydir-limits, team-limits): choose one with --policy"},
		{"several, one named", "team-limits", append([]runtime.Object{other}, policy...), "team-limits has no binding"},
		{"not the chart's", "", []runtime.Object{&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"app.kubernetes.io/name": "emptydir-limits"}}}},
			"x is not emptyDir guard's limit policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ReadLimitPolicy(ctx, fake.NewClientset(tc.objs...), tc.policy)
			if tc.want == "" {
				if err != nil || p.Name != "emptydir-limits" || !p.SizeLimit || !p.EphemeralStorage || !p.Workloads || !p.ControllersSkipped {
					t.Errorf("%+v, %v: want the component's policy, every check on", p, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestPolicyCheckRun: the command prints the table (NAMESPACE with -A, OWNER with -o wide),
// JSON with everything, and says so when there is nothing.
func TestPolicyCheckRun(t *testing.T) {
	client := checkCluster(componentPolicy(t, nil))
	o, out, _ := testOptions("shop")
	c := &PolicyCheckOptions{Options: o, Client: client, AllNamespaces: true}
	o.Output = "wide"
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 6 || strings.Join(strings.Fields(lines[0]), " ") != "NAMESPACE KIND NAME REFUSED MISSING OWNER" ||
		strings.Join(strings.Fields(lines[3]), " ") != "shop Pod build-1 re-creation sizeLimit: cache; ephemeral-storage: init,app Workflow/build" {
		t.Errorf("-A -o wide printed\n%s", out)
	}

	out.Reset()
	o.Output = "json"
	c.AllNamespaces = false
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var list PolicyCheckList
	if err := json.Unmarshal(out.Bytes(), &list); err != nil || list.Kind != "PolicyCheckList" || list.Policy != "emptydir-limits" || len(list.Items) != 5 ||
		list.Items[0].Kind != "CronJob" || list.Items[0].Refused != RefusedTemplateChange ||
		strings.Join(list.Items[0].VolumesWithoutSizeLimit, ",") != "cache" || strings.Join(list.Items[0].ContainersWithoutEphemeralStorageLimit, ",") != "init,app" {
		t.Errorf("-n shop -o json printed %s (%v)", out, err)
	}

	o, out, errOut := testOptions("exempt")
	c = &PolicyCheckOptions{Options: o, Client: client}
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 || !strings.Contains(errOut.String(), "Nothing the limit policy emptydir-limits would refuse under Deny in namespace exempt.") {
		t.Errorf("-n exempt printed %q, %q", out, errOut)
	}
}

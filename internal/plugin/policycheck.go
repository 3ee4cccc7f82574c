package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

// LimitPolicyLabel selects the chart's limit policy (app.kubernetes.io/name of its
// ValidatingAdmissionPolicy and binding).
const LimitPolicyLabel = "app.kubernetes.io/name=emptydir-limits"

// The names the chart's limit policy gives its parts (templates/limitpolicy.yaml), which the
// check reads to know what the installed policy checks.
const (
	policyVarWithoutSizeLimit        = "withoutSizeLimit"
	policyVarWithoutEphemeralStorage = "withoutEphemeralStorageLimit"
	policyControllersCondition       = "not-a-built-in-controller"
)

// What Deny would refuse of an object that lacks its limits (PolicyCheckItem.Refused).
const (
	// RefusedTemplateChange: the workload runs on, and its controller replaces its pods, but
	// the next change of its pod template (a rollout restart, an image bump) is refused.
	RefusedTemplateChange = "template-change"
	// RefusedRecreation: the next one like it is refused, whoever makes it (a pod's
	// replacement or its creator's next; a ReplicaSet's or Job's next from its owner's
	// controller, where the policy checks the built-in controllers).
	RefusedRecreation = "re-creation"
)

// PolicyCheckList is what `policy-check -o json|yaml` prints.
type PolicyCheckList struct {
	metav1.TypeMeta `json:",inline"`
	// Policy is the ValidatingAdmissionPolicy whose checks were applied.
	Policy string            `json:"policy"`
	Items  []PolicyCheckItem `json:"items"`
}

// DeepCopyObject copies l enough to print it.
func (l *PolicyCheckList) DeepCopyObject() runtime.Object {
	c := *l
	c.Items = slices.Clone(l.Items)
	return &c
}

// Refs are the items, for -o name.
func (l *PolicyCheckList) Refs() []Ref {
	refs := make([]Ref, len(l.Items))
	for i, it := range l.Items {
		refs[i] = Ref{Group: GroupOf(it.Kind), Kind: it.Kind, Name: it.Name}
	}
	return refs
}

// PolicyCheckItem is an object the limit policy, under Deny, would refuse something of.
type PolicyCheckItem struct {
	Namespace string `json:"namespace"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	// Owner is the pod's controller (Kind/name), if it has one.
	Owner string `json:"owner,omitempty"`
	// Refused is what Deny refuses: RefusedTemplateChange or RefusedRecreation.
	Refused string `json:"refused"`
	// VolumesWithoutSizeLimit and ContainersWithoutEphemeralStorageLimit are what the policy's
	// message would name.
	VolumesWithoutSizeLimit                []string `json:"volumesWithoutSizeLimit,omitempty"`
	ContainersWithoutEphemeralStorageLimit []string `json:"containersWithoutEphemeralStorageLimit,omitempty"`
}

// Missing is the MISSING cell: what the policy's message would name.
func (i PolicyCheckItem) Missing() string {
	var parts []string
	if len(i.VolumesWithoutSizeLimit) > 0 {
		parts = append(parts, "sizeLimit: "+strings.Join(i.VolumesWithoutSizeLimit, ","))
	}
	if len(i.ContainersWithoutEphemeralStorageLimit) > 0 {
		parts = append(parts, "ephemeral-storage: "+strings.Join(i.ContainersWithoutEphemeralStorageLimit, ","))
	}
	return strings.Join(parts, "; ")
}

// LimitPolicy is what the installed limit policy checks, read from it and its bindings.
type LimitPolicy struct {
	Name string
	// SizeLimit and EphemeralStorage are its two checks (limitPolicy.checks).
	SizeLimit, EphemeralStorage bool
	// Workloads: it checks workloads' pod templates (limitPolicy.workloads), and what the
	// built-in controllers make from them is not checked again (ControllersSkipped).
	Workloads, ControllersSkipped bool
	// namespaces select the namespaces it checks: one selector per binding (any of them).
	namespaces []labels.Selector
}

// ReadLimitPolicy reads the limit policy name (empty: the one labelled LimitPolicyLabel)
// and its bindings.
func ReadLimitPolicy(ctx context.Context, client kubernetes.Interface, name string) (*LimitPolicy, error) {
	api := client.AdmissionregistrationV1()
	var vap *admissionregistrationv1.ValidatingAdmissionPolicy
	if name != "" {
		var err error
		if vap, err = api.ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{}); err != nil {
			return nil, fmt.Errorf("reading the limit policy: %w", err)
		}
	} else {
		list, err := api.ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{LabelSelector: LimitPolicyLabel})
		if err != nil {
			return nil, fmt.Errorf("listing the limit policies (%s): %w", LimitPolicyLabel, err)
		}
		switch len(list.Items) {
		case 0:
			return nil, fmt.Errorf("no ValidatingAdmissionPolicy labelled %s: install the limit policy (limitPolicy.enabled, under Warn) first, or name it with --policy", LimitPolicyLabel)
		case 1:
			vap = &list.Items[0]
		default:
			var names []string
			for _, p := range list.Items {
				names = append(names, p.Name)
			}
			return nil, UsageError(fmt.Errorf("several limit policies (%s): choose one with --policy", strings.Join(names, ", ")))
		}
	}
	p := &LimitPolicy{Name: vap.Name}
	var vars int
	for _, v := range vap.Spec.Variables {
		switch v.Name {
		case policyVarWithoutSizeLimit:
			vars++
			p.SizeLimit = strings.TrimSpace(v.Expression) != "[]"
		case policyVarWithoutEphemeralStorage:
			vars++
			p.EphemeralStorage = strings.TrimSpace(v.Expression) != "[]"
		}
	}
	if vars != 2 {
		return nil, fmt.Errorf("ValidatingAdmissionPolicy %s is not emptyDir guard's limit policy (no variables %s and %s)", vap.Name, policyVarWithoutSizeLimit, policyVarWithoutEphemeralStorage)
	}
	if mc := vap.Spec.MatchConstraints; mc != nil {
		for _, r := range mc.ResourceRules {
			if slices.Contains(r.APIGroups, "apps") && slices.Contains(r.Resources, "deployments") {
				p.Workloads = true
			}
		}
	}
	for _, c := range vap.Spec.MatchConditions {
		if c.Name == policyControllersCondition {
			p.ControllersSkipped = true
		}
	}
	bindings, err := api.ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the bindings of %s: %w", vap.Name, err)
	}
	for _, b := range bindings.Items {
		if b.Spec.PolicyName != vap.Name {
			continue
		}
		sel := labels.Everything()
		if mr := b.Spec.MatchResources; mr != nil && mr.NamespaceSelector != nil {
			if sel, err = metav1.LabelSelectorAsSelector(mr.NamespaceSelector); err != nil {
				return nil, fmt.Errorf("binding %s: %w", b.Name, err)
			}
		}
		p.namespaces = append(p.namespaces, sel)
	}
	if len(p.namespaces) == 0 {
		return nil, fmt.Errorf("the limit policy %s has no binding: it checks nothing", vap.Name)
	}
	return p, nil
}

// checks reports whether a binding of p selects the namespace ns.
func (p *LimitPolicy) checks(ns *corev1.Namespace) bool {
	for _, s := range p.namespaces {
		if s.Matches(labels.Set(ns.Labels)) {
			return true
		}
	}
	return false
}

// Missing is what the policy's checks find missing in spec, in its message's order: the disk
// emptyDirs (no medium) without a sizeLimit above 0, the init containers and containers
// without an ephemeral-storage limit above 0 (templates/limitpolicy.yaml's withoutSizeLimit
// and withoutEphemeralStorageLimit).
func (p *LimitPolicy) Missing(spec *corev1.PodSpec) (volumes, containers []string) {
	if p.SizeLimit {
		for _, v := range spec.Volumes {
			if ed := v.EmptyDir; ed != nil && ed.Medium == corev1.StorageMediumDefault && (ed.SizeLimit == nil || ed.SizeLimit.Sign() <= 0) {
				volumes = append(volumes, v.Name)
			}
		}
	}
	if p.EphemeralStorage {
		for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
			for _, c := range cs {
				if l, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; !ok || l.Sign() <= 0 {
					containers = append(containers, c.Name)
				}
			}
		}
	}
	return volumes, containers
}

// builtInPodOwners are the kinds whose pods kube-controller-manager's built-in controllers
// make (from a template the policy checks), and the kinds that own a built-in workload
// whose template they copy (a Deployment's ReplicaSets, a CronJob's Jobs).
var (
	builtInPodOwners = map[string]bool{"apps/ReplicaSet": true, "apps/StatefulSet": true, "apps/DaemonSet": true, "batch/Job": true, "/ReplicationController": true}
	builtInOwnerOf   = map[string]string{"ReplicaSet": "apps/Deployment", "Job": "batch/CronJob"}
)

// ownerOf is the object's controller as group/Kind and Kind/name, or "", "".
func ownerOf(m *metav1.ObjectMeta) (groupKind, ref string) {
	c := metav1.GetControllerOfNoCopy(m)
	if c == nil {
		return "", ""
	}
	gv, _ := schema.ParseGroupVersion(c.APIVersion)
	return gv.Group + "/" + c.Kind, c.Kind + "/" + c.Name
}

// PolicyCheck lists what the limit policy p, switched to Deny, would refuse in the namespace
// ns ("": every namespace it checks): the workloads whose pod template lacks the limits (their
// next template change), and the pods that lack them and that no built-in controller would
// remake (the next pod like them). A pod's or a ReplicaSet's controller, read from its
// ownerReferences, only decides where it is listed: the policy knows the built-in controllers
// by the user they run as, not by ownerReferences, which a tenant may write.
func PolicyCheck(ctx context.Context, client kubernetes.Interface, p *LimitPolicy, ns string) ([]PolicyCheckItem, error) {
	checked := map[string]bool{}
	if ns != "" {
		n, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading namespace %s, whose labels say whether the policy checks it: %w", ns, err)
		}
		checked[ns] = p.checks(n)
	} else {
		list, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing namespaces, whose labels say whether the policy checks them: %w", err)
		}
		for i := range list.Items {
			checked[list.Items[i].Name] = p.checks(&list.Items[i])
		}
	}
	var out []PolicyCheckItem
	add := func(m *metav1.ObjectMeta, kind, refused string, spec *corev1.PodSpec) {
		if !checked[m.Namespace] {
			return
		}
		vols, ctrs := p.Missing(spec)
		if len(vols) == 0 && len(ctrs) == 0 {
			return
		}
		_, owner := ownerOf(m)
		out = append(out, PolicyCheckItem{Namespace: m.Namespace, Kind: kind, Name: m.Name, Owner: owner, Refused: refused,
			VolumesWithoutSizeLimit: vols, ContainersWithoutEphemeralStorageLimit: ctrs})
	}
	// ownedByBuiltIn: the object's controller is a built-in workload of the kind that makes it.
	ownedByBuiltIn := func(m *metav1.ObjectMeta, kind string) bool {
		gk, _ := ownerOf(m)
		return builtInOwnerOf[kind] != "" && gk == builtInOwnerOf[kind]
	}
	if p.Workloads {
		if err := listWorkloads(ctx, client, ns, func(m *metav1.ObjectMeta, kind string, spec *corev1.PodSpec) {
			if ownedByBuiltIn(m, kind) {
				// A Deployment's ReplicaSet, a CronJob's Job: its owner's template is listed.
				// Its owner's controller remakes it unchecked, unless the policy checks the
				// built-in controllers too (a policy older than that matchConditions).
				if !p.ControllersSkipped {
					add(m, kind, RefusedRecreation, spec)
				}
				return
			}
			add(m, kind, RefusedTemplateChange, spec)
		}); err != nil {
			return nil, err
		}
	}
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if gk, _ := ownerOf(&pod.ObjectMeta); p.ControllersSkipped && builtInPodOwners[gk] {
			continue // its workload's template is what counts, listed above
		}
		add(&pod.ObjectMeta, "Pod", RefusedRecreation, &pod.Spec)
	}
	slices.SortStableFunc(out, func(a, b PolicyCheckItem) int {
		return strings.Compare(a.Namespace+"\x00"+a.Kind+"\x00"+a.Name, b.Namespace+"\x00"+b.Kind+"\x00"+b.Name)
	})
	return out, nil
}

// listWorkloads calls f with the pod template of every workload kind the policy checks.
func listWorkloads(ctx context.Context, client kubernetes.Interface, ns string, f func(m *metav1.ObjectMeta, kind string, spec *corev1.PodSpec)) error {
	opts := metav1.ListOptions{}
	apps, batch, core := client.AppsV1(), client.BatchV1(), client.CoreV1()
	var errs []error
	wrap := func(kind string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("listing %s: %w", kind, err))
		}
	}
	if l, err := apps.Deployments(ns).List(ctx, opts); err == nil {
		for i := range l.Items {
			f(&l.Items[i].ObjectMeta, "Deployment", &l.Items[i].Spec.Template.Spec)
		}
	} else {
		wrap("Deployments", err)
	}
	if l, err := apps.StatefulSets(ns).List(ctx, opts); err == nil {
		for i := range l.Items {
			f(&l.Items[i].ObjectMeta, "StatefulSet", &l.Items[i].Spec.Template.Spec)
		}
	} else {
		wrap("StatefulSets", err)
	}
	if l, err := apps.DaemonSets(ns).List(ctx, opts); err == nil {
		for i := range l.Items {
			f(&l.Items[i].ObjectMeta, "DaemonSet", &l.Items[i].Spec.Template.Spec)
		}
	} else {
		wrap("DaemonSets", err)
	}
	if l, err := apps.ReplicaSets(ns).List(ctx, opts); err == nil {
		for i := range l.Items {
			f(&l.Items[i].ObjectMeta, "ReplicaSet", &l.Items[i].Spec.Template.Spec)
		}
	} else {
		wrap("ReplicaSets", err)
	}
	if l, err := batch.CronJobs(ns).List(ctx, opts); err == nil {
		for i := range l.Items {
			f(&l.Items[i].ObjectMeta, "CronJob", &l.Items[i].Spec.JobTemplate.Spec.Template.Spec)
		}
	} else {
		wrap("CronJobs", err)
	}
	if l, err := batch.Jobs(ns).List(ctx, opts); err == nil {
		for i := range l.Items {
			f(&l.Items[i].ObjectMeta, "Job", &l.Items[i].Spec.Template.Spec)
		}
	} else {
		wrap("Jobs", err)
	}
	if l, err := core.ReplicationControllers(ns).List(ctx, opts); err == nil {
		for i := range l.Items {
			if t := l.Items[i].Spec.Template; t != nil {
				f(&l.Items[i].ObjectMeta, "ReplicationController", &t.Spec)
			}
		}
	} else {
		wrap("ReplicationControllers", err)
	}
	return errors.Join(errs...)
}

// PolicyCheckOptions are `policy-check`'s settings beside the shared ones.
type PolicyCheckOptions struct {
	*Options
	AllNamespaces bool
	// Policy names the ValidatingAdmissionPolicy; empty: the one labelled LimitPolicyLabel.
	Policy string

	// Client replaces the one the kubeconfig makes (tests).
	Client kubernetes.Interface
}

// Run lists and prints.
func (o *PolicyCheckOptions) Run(ctx context.Context) error {
	f, err := o.Format("wide")
	if err != nil {
		return err
	}
	client := o.Client
	if client == nil {
		c, err := o.Clientset()
		if err != nil {
			return err
		}
		client = c
	}
	ns := ""
	if !o.AllNamespaces {
		var err error
		if ns, err = o.Namespace(); err != nil {
			return err
		}
	}
	p, err := ReadLimitPolicy(ctx, client, o.Policy)
	if err != nil {
		return err
	}
	items, err := PolicyCheck(ctx, client, p, ns)
	if err != nil {
		return err
	}
	list := PolicyCheckList{TypeMeta: TypeMeta("PolicyCheckList"), Policy: p.Name, Items: items}
	if list.Items == nil {
		list.Items = []PolicyCheckItem{}
	}
	if len(items) == 0 && (f == FormatTable || f == FormatWide) {
		where := "namespace " + ns
		if o.AllNamespaces {
			where = "any namespace"
		}
		fmt.Fprintf(o.ErrOut, "Nothing the limit policy %s would refuse under Deny in %s.\n", p.Name, where)
		return nil
	}
	return o.Print(f, policyCheckTable(items, o.AllNamespaces), &list)
}

// policyCheckTable is the table of policy-check: NAMESPACE only with -A, as kubectl prints it.
func policyCheckTable(items []PolicyCheckItem, allNamespaces bool) *Table {
	t := &Table{Columns: []Column{{Name: "NAMESPACE"}, {Name: "KIND"}, {Name: "NAME"}, {Name: "REFUSED"}, {Name: "MISSING"}, {Name: "OWNER", Wide: true}}}
	if !allNamespaces {
		t.Columns = t.Columns[1:]
	}
	for _, i := range items {
		owner := i.Owner
		if owner == "" {
			owner = "<none>"
		}
		cells := []string{i.Namespace, i.Kind, i.Name, i.Refused, i.Missing(), owner}
		if !allNamespaces {
			cells = cells[1:]
		}
		t.Add(cells...)
	}
	return t
}

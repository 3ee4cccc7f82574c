package helmchart_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// admitter runs the API server's own admission code for ValidatingAdmissionPolicies (the
// plugin k8s.io/apiserver/pkg/admission/plugin/policy/validating, which kube-apiserver runs, at
// the version kube-apiserver v1.37 has) on the chart's rendered policy and binding, with the
// namespaces given: the binding's namespaceSelector, the policy's matchConstraints,
// matchConditions, variables and validations, the actions, all as the API server evaluates
// them. TestLimitPolicyOnRealAPIServer (test/e2e) does the same on a real kube-apiserver.
type admitter struct {
	plugin *validating.Plugin
}

// tenant is the user of the requests that name no other: a person or a CD tool with the
// RBAC of a namespace, who writes its pods' labels, annotations and ownerReferences.
var tenant user.Info = &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}

// controller is the user a built-in controller of kube-controller-manager runs as, with
// --use-service-account-credentials (kubeadm's default): its service account in kube-system,
// as the API server's authentication names it.
func controller(name string) user.Info {
	return serviceAccountUser("kube-system", name)
}

func serviceAccountUser(ns, name string) user.Info {
	return &user.DefaultInfo{Name: serviceaccount.MakeUsername(ns, name),
		Groups: []string{serviceaccount.AllServiceAccountsGroup, serviceaccount.MakeNamespaceGroupName(ns), user.AllAuthenticated}}
}

// namespace is a Namespace with labels, and kubernetes.io/metadata.name as the API server sets it.
func namespace(name string, labels map[string]string) *corev1.Namespace {
	l := map[string]string{corev1.LabelMetadataName: name}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

// newAdmitter loads the policies and bindings of r into the plugin, with namespaces.
func newAdmitter(t *testing.T, r rendered, namespaces ...*corev1.Namespace) *admitter {
	t.Helper()
	var objs []runtime.Object
	for _, o := range r.objs {
		switch o := o.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			o = o.DeepCopy()
			defaultPolicy(o)
			objs = append(objs, o)
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			o = o.DeepCopy()
			defaultMatchResources(o.Spec.MatchResources)
			objs = append(objs, o)
		}
	}
	if len(objs) == 0 {
		t.Fatal("the chart rendered no ValidatingAdmissionPolicy")
	}
	for _, ns := range namespaces {
		objs = append(objs, ns)
	}
	client := kubefake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })

	p, err := validating.NewPlugin(nil)
	if err != nil {
		t.Fatal(err)
	}
	p.SetDrainedNotification(stop)
	p.SetExternalKubeClientSet(client)
	p.SetExternalKubeInformerFactory(factory)
	p.SetDynamicClient(fake.NewSimpleDynamicClient(clientgoscheme.Scheme))
	p.SetRESTMapper(meta.NewDefaultRESTMapper(nil))
	p.SetUnconditionalAuthorizer(allowAll{})
	p.SetAPIServerID("test")
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	factory.Start(stop)
	if !p.WaitForReady() {
		t.Fatal("the admission plugin did not load the policy")
	}
	return &admitter{plugin: p}
}

// verdict is the outcome of one request: the error that refuses it (nil: admitted) and the
// warnings sent back with it.
type verdict struct {
	err      error
	warnings []string
}

func (v verdict) admitted() bool { return v.err == nil }

// flagged: refused, or warned.
func (v verdict) flagged() bool { return v.err != nil || len(v.warnings) > 0 }

func (v verdict) String() string {
	if v.err != nil {
		return "refused: " + v.err.Error()
	}
	if len(v.warnings) > 0 {
		return "admitted, warning " + strings.Join(v.warnings, "; ")
	}
	return "admitted"
}

// create is the creation of obj by u, as admission sees it.
func (a *admitter) create(t *testing.T, obj runtime.Object, u user.Info) verdict {
	t.Helper()
	return a.request(t, admission.Create, obj, nil, u)
}

// update is the update of old to obj by u, as admission sees it.
func (a *admitter) update(t *testing.T, obj, old runtime.Object, u user.Info) verdict {
	t.Helper()
	return a.request(t, admission.Update, obj, old, u)
}

func (a *admitter) request(t *testing.T, op admission.Operation, obj, old runtime.Object, u user.Info) verdict {
	t.Helper()
	kinds, _, err := clientgoscheme.Scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatal(err)
	}
	gvk := kinds[0]
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	attrs := admission.NewAttributesRecord(obj, old, gvk, m.GetNamespace(), m.GetName(), gvr, "", op, createOrUpdateOptions(op), false, u)
	rec := &warnings{}
	ctx, cancel := context.WithTimeout(warning.WithWarningRecorder(context.Background(), rec), 10*time.Second)
	defer cancel()
	err = a.plugin.Validate(ctx, attrs, admission.NewObjectInterfacesFromScheme(clientgoscheme.Scheme))
	return verdict{err: err, warnings: rec.take()}
}

func createOrUpdateOptions(op admission.Operation) runtime.Object {
	if op == admission.Update {
		return &metav1.UpdateOptions{}
	}
	return &metav1.CreateOptions{}
}

// warnings records the warnings admission adds (warning.Recorder).
type warnings struct {
	mu   sync.Mutex
	text []string
}

func (w *warnings) AddWarning(_, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text = append(w.text, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.text
}

// allowAll authorizes everything (the policies here have no paramKind to authorize).
type allowAll struct{}

func (allowAll) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
}

// defaultPolicy sets the defaults the API server sets when it stores a policy
// (pkg/apis/admissionregistration/v1's SetDefaults_*), which the admission code relies on.
func defaultPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
	if p.Spec.FailurePolicy == nil {
		p.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	}
	if p.Spec.MatchConstraints == nil {
		p.Spec.MatchConstraints = &admissionregistrationv1.MatchResources{}
	}
	defaultMatchResources(p.Spec.MatchConstraints)
}

func defaultMatchResources(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
	if m.MatchPolicy == nil {
		m.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rules {
			if rules[i].Scope == nil {
				rules[i].Scope = ptr.To(admissionregistrationv1.AllScopes)
			}
		}
	}
}

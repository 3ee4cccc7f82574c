package deploy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/deploy"
	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
)

// manifests is the decoded base, by kind and name.
type manifests struct{ objs []runtime.Object }

func loadBase(t *testing.T) manifests {
	t.Helper()
	objs, err := deploy.BaseObjects()
	if err != nil {
		t.Fatalf("decoding the base: %v", err)
	}
	return manifests{objs}
}

// find is the object of type T named name, or T's zero value.
func find[T runtime.Object](m manifests, name string) T {
	v, _ := deploy.Find[T](m.objs, name)
	return v
}

func all[T runtime.Object](m manifests) []T {
	var out []T
	for _, o := range m.objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func exporterDS(t *testing.T, m manifests) *appsv1.DaemonSet {
	t.Helper()
	return deploytest.MustFind[*appsv1.DaemonSet](t, m.objs, "emptydir-exporter")
}

func remediatorDeploy(t *testing.T, m manifests) *appsv1.Deployment {
	t.Helper()
	return deploytest.MustFind[*appsv1.Deployment](t, m.objs, "emptydir-remediator")
}

func TestBaseDecodesIntoTypedObjects(t *testing.T) {
	m := loadBase(t)
	want := []string{
		"Namespace/emptydir-guard",
		"ServiceAccount/emptydir-exporter", "ClusterRole/emptydir-exporter", "ClusterRoleBinding/emptydir-exporter",
		"DaemonSet/emptydir-exporter", "Service/emptydir-exporter",
		"ServiceAccount/emptydir-remediator", "ClusterRole/emptydir-remediator", "ClusterRoleBinding/emptydir-remediator",
		"Role/emptydir-remediator", "RoleBinding/emptydir-remediator", "Deployment/emptydir-remediator",
		"Service/emptydir-remediator", "PodDisruptionBudget/emptydir-remediator",
		"NetworkPolicy/emptydir-exporter", "NetworkPolicy/emptydir-remediator",
	}
	var got []string
	for _, o := range m.objs {
		if _, ok := o.(*unstructured.Unstructured); ok {
			t.Errorf("%s is not a typed object of client-go's scheme", o.GetObjectKind().GroupVersionKind())
			continue
		}
		acc := o.(metav1.Object)
		kind := o.GetObjectKind().GroupVersionKind().Kind
		got = append(got, kind+"/"+acc.GetName())
		clusterScoped := kind == "Namespace" || kind == "ClusterRole" || kind == "ClusterRoleBinding"
		if clusterScoped != (acc.GetNamespace() == "") || (!clusterScoped && acc.GetNamespace() != deploy.Namespace) {
			t.Errorf("%s/%s has namespace %q", kind, acc.GetName(), acc.GetNamespace())
		}
		if acc.GetLabels()["app.kubernetes.io/part-of"] != "emptydir-guard" {
			t.Errorf("%s/%s lacks the label app.kubernetes.io/part-of=emptydir-guard", kind, acc.GetName())
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("base objects\n got %v\nwant %v", got, want)
	}

	// The example Secret decodes too, and is not part of the base: a known token must never
	// be installed by default.
	sec, err := deploy.DecodeFile(deploy.WebhookSecretExample)
	if err != nil {
		t.Fatal(err)
	}
	if len(sec) != 1 {
		t.Fatalf("%s: %d objects", deploy.WebhookSecretExample, len(sec))
	}
	if s, ok := sec[0].(*corev1.Secret); !ok || s.StringData["token"] == "" {
		t.Errorf("%s is not a Secret with a token", deploy.WebhookSecretExample)
	}
	for _, o := range m.objs {
		if _, ok := o.(*corev1.Secret); ok {
			t.Error("the base must not ship a Secret")
		}
	}
}

// TestKustomizationsListTheirFiles: every manifest in deploy/ is in the base (except the
// examples), and every resource a kustomization or component names exists and decodes.
func TestKustomizationsListTheirFiles(t *testing.T) {
	k, err := deploy.ReadKustomization(".")
	if err != nil {
		t.Fatal(err)
	}
	if k.Namespace != deploy.Namespace {
		t.Errorf("kustomization namespace %q", k.Namespace)
	}
	entries, err := deploy.Files.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && strings.HasSuffix(n, ".yaml") && n != "kustomization.yaml" && !strings.HasSuffix(n, ".example.yaml") {
			files = append(files, n)
		}
	}
	res := slices.Clone(k.Resources)
	sort.Strings(res)
	sort.Strings(files)
	if !slices.Equal(res, files) {
		t.Errorf("kustomization resources %v, manifests in deploy/ %v", res, files)
	}
	comps, err := deploy.Files.ReadDir("components")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range comps {
		dir := "components/" + c.Name()
		ck, err := deploy.ReadKustomization(dir)
		if err != nil {
			t.Errorf("%s: %v", dir, err)
			continue
		}
		if ck.Kind != "Component" {
			t.Errorf("%s: kind %q, want Component", dir, ck.Kind)
		}
		for _, r := range ck.Resources {
			p := path.Clean(path.Join(dir, r))
			if strings.HasPrefix(p, "../") {
				// Outside deploy/ (rules/prometheusrule.yaml, generated by someone else).
				b, err := os.ReadFile(filepath.FromSlash(p))
				if err != nil {
					t.Errorf("%s: resource %s: %v", dir, r, err)
					continue
				}
				if _, err := deploy.Decode(b); err != nil {
					t.Errorf("%s: resource %s: %v", dir, r, err)
				}
				continue
			}
			if _, err := deploy.DecodeFile(p); err != nil {
				t.Errorf("%s: resource %s: %v", dir, r, err)
			}
		}
	}
}

// ---- flags ----

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

var helpFlagRE = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--(\[no-\])?([A-Za-z0-9][A-Za-z0-9.\-]*)`)

// helpFlags parses the flag names of a command's --help output; the value says whether the
// flag is a boolean (--[no-]name).
func helpFlags(t *testing.T, bin string) map[string]bool {
	t.Helper()
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v\n%s", bin, err, out)
	}
	flags := map[string]bool{}
	for _, m := range helpFlagRE.FindAllStringSubmatch(string(out), -1) {
		flags[m[2]] = m[1] != ""
	}
	if len(flags) < 5 {
		t.Fatalf("%s --help: found only flags %v in\n%s", bin, flags, out)
	}
	return flags
}

var varRefRE = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand replaces $(VAR) references the way the kubelet does, with a sample value for
// variables the container declares (downward API ones included).
func expand(arg string, c corev1.Container) (string, error) {
	var missing []string
	out := varRefRE.ReplaceAllStringFunc(arg, func(ref string) string {
		name := ref[2 : len(ref)-1]
		for _, e := range c.Env {
			if e.Name == name {
				if e.Value != "" {
					return e.Value
				}
				return "192.0.2.10" // a downward API value; an IP fits every use here
			}
		}
		missing = append(missing, name)
		return ref
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%q refers to undeclared env %v (the kubelet would pass it literally)", arg, missing)
	}
	return out, nil
}

// checkArgs fails unless every arg is a --flag=value (or a bare boolean --flag) that the
// command declares, and the real binary parses the whole list.
func checkArgs(t *testing.T, where string, c corev1.Container, args []string) {
	t.Helper()
	if len(c.Command) != 1 {
		t.Fatalf("%s: command %v, want exactly the binary", where, c.Command)
	}
	name := path.Base(c.Command[0])
	bin := testbin.Path(t, name)
	flags := helpFlags(t, bin)
	var expanded []string
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			t.Errorf("%s: arg %q is not a --flag", where, a)
			continue
		}
		flag, val, hasVal := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		isBool, ok := flags[flag]
		if !ok && strings.HasPrefix(flag, "no-") {
			isBool, ok = flags[strings.TrimPrefix(flag, "no-")]
			ok = ok && isBool
		}
		switch {
		case !ok:
			t.Errorf("%s: %s has no flag --%s", where, name, flag)
		case isBool && hasVal && val != "true" && val != "false":
			t.Errorf("%s: boolean --%s with value %q", where, flag, val)
		case !isBool && !hasVal:
			t.Errorf("%s: --%s needs =value (write flags as --name=value)", where, flag)
		}
		e, err := expand(a, c)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		expanded = append(expanded, e)
	}
	// kingpin parses every flag (unknown ones fail) before --version's action exits 0.
	cmd := exec.Command(bin, append(expanded, "--version")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s: %s %s --version: %v\n%s", where, name, strings.Join(expanded, " "), err, out)
	}
	// And the check itself works: a bad flag is rejected.
	if out, err := exec.Command(bin, append(slices.Clone(expanded), "--no-such-flag-here", "--version")...).CombinedOutput(); err == nil {
		t.Errorf("%s: %s accepted --no-such-flag-here; the flag check proves nothing\n%s", where, name, out)
	}
}

func TestManifestFlagsExistInCommands(t *testing.T) {
	m := loadBase(t)
	ds := exporterDS(t, m)
	d := remediatorDeploy(t, m)
	for _, c := range ds.Spec.Template.Spec.Containers {
		checkArgs(t, "DaemonSet/"+ds.Name+"/"+c.Name, c, c.Args)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		checkArgs(t, "Deployment/"+d.Name+"/"+c.Name, c, c.Args)
	}

	// The components' patches that replace args.
	comps, err := deploy.Files.ReadDir("components")
	if err != nil {
		t.Fatal(err)
	}
	for _, comp := range comps {
		k, err := deploy.ReadKustomization("components/" + comp.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range k.Patches {
			var ops []struct {
				Op    string          `json:"op"`
				Path  string          `json:"path"`
				Value json.RawMessage `json:"value"`
			}
			if err := yaml.Unmarshal([]byte(p.Patch), &ops); err != nil {
				t.Errorf("components/%s: patch: %v", comp.Name(), err)
				continue
			}
			for _, op := range ops {
				if !strings.HasSuffix(op.Path, "/args") {
					continue
				}
				var args []string
				if err := yaml.Unmarshal(op.Value, &args); err != nil {
					t.Errorf("components/%s: %s: %v", comp.Name(), op.Path, err)
					continue
				}
				var spec corev1.PodSpec
				switch p.Target.Kind {
				case "DaemonSet":
					spec = ds.Spec.Template.Spec
				case "Deployment":
					spec = d.Spec.Template.Spec
				default:
					t.Errorf("components/%s: args patch on %s", comp.Name(), p.Target.Kind)
					continue
				}
				i := 0
				if _, err := fmt.Sscanf(op.Path, "/spec/template/spec/containers/%d/args", &i); err != nil || i >= len(spec.Containers) {
					t.Errorf("components/%s: patch path %s", comp.Name(), op.Path)
					continue
				}
				checkArgs(t, "components/"+comp.Name(), spec.Containers[i], args)
			}
		}
	}
}

// ---- labels, selectors, ports, wiring ----

func argValue(args []string, flag string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+flag+"="); ok {
			return v, true
		}
	}
	return "", false
}

func namedPort(c corev1.Container, name string) (int32, bool) {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

func TestLabelsSelectorsAndPorts(t *testing.T) {
	m := loadBase(t)
	ds := exporterDS(t, m)
	d := remediatorDeploy(t, m)
	expLabels := labels.Set(ds.Spec.Template.Labels)
	remLabels := labels.Set(d.Spec.Template.Labels)
	mustSelector := func(what string, ls *metav1.LabelSelector) labels.Selector {
		s, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil || s.Empty() {
			t.Fatalf("%s: selector %v: %v", what, ls, err)
		}
		return s
	}
	if s := mustSelector("DaemonSet", ds.Spec.Selector); !s.Matches(expLabels) || s.Matches(remLabels) {
		t.Errorf("DaemonSet selector %s must select its pods only", s)
	}
	if s := mustSelector("Deployment", d.Spec.Selector); !s.Matches(remLabels) || s.Matches(expLabels) {
		t.Errorf("Deployment selector %s must select its pods only", s)
	}
	if expLabels["app.kubernetes.io/name"] != "emptydir-exporter" || remLabels["app.kubernetes.io/name"] != "emptydir-remediator" {
		t.Errorf("pod name labels %v, %v", expLabels, remLabels)
	}
	pdb := find[*policyv1.PodDisruptionBudget](m, "emptydir-remediator")
	if pdb == nil {
		t.Fatal("no PodDisruptionBudget")
	}
	if s := mustSelector("PDB", pdb.Spec.Selector); !s.Matches(remLabels) || s.Matches(expLabels) {
		t.Errorf("PDB selector %s must select the remediator pods only", s)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() >= int(*d.Spec.Replicas) {
		t.Errorf("PDB minAvailable %v with %d replicas blocks every drain", pdb.Spec.MinAvailable, *d.Spec.Replicas)
	}

	exp := ds.Spec.Template.Spec.Containers[0]
	rem := d.Spec.Template.Spec.Containers[0]
	metricsPort, ok := namedPort(exp, "metrics")
	if !ok || metricsPort != 9731 {
		t.Errorf("exporter port metrics = %d (found %v), want 9731", metricsPort, ok)
	}
	if listen, _ := argValue(exp.Args, "web.listen-address"); listen != fmt.Sprintf(":%d", metricsPort) {
		t.Errorf("exporter listens on %q, its port is %d", listen, metricsPort)
	}
	httpPort, ok := namedPort(rem, "http")
	if !ok || httpPort != 9732 {
		t.Errorf("remediator port http = %d (found %v), want 9732", httpPort, ok)
	}
	if listen, _ := argValue(rem.Args, "web.listen-address"); listen != fmt.Sprintf(":%d", httpPort) {
		t.Errorf("remediator listens on %q, its port is %d", listen, httpPort)
	}

	// The remediator finds the exporter on a node by these flags.
	sel, ok := argValue(rem.Args, "exporter.selector")
	if !ok {
		sel = "app.kubernetes.io/name=emptydir-exporter" // the command's default
	}
	s, err := labels.Parse(sel)
	if err != nil {
		t.Fatalf("--exporter.selector=%s: %v", sel, err)
	}
	if !s.Matches(expLabels) || s.Matches(remLabels) {
		t.Errorf("--exporter.selector=%s must match the exporter pods (%v) and only them", sel, expLabels)
	}
	if port, ok := argValue(rem.Args, "exporter.port"); ok && port != fmt.Sprint(metricsPort) {
		t.Errorf("--exporter.port=%s, the exporter's port is %d", port, metricsPort)
	}
	if ns, ok := argValue(rem.Args, "exporter.namespace"); ok && ns != ds.Namespace {
		t.Errorf("--exporter.namespace=%s, the exporter runs in %s", ns, ds.Namespace)
	}
	if sc, ok := argValue(rem.Args, "exporter.scheme"); ok && sc != "http" {
		t.Errorf("--exporter.scheme=%s but the exporter serves plain HTTP", sc)
	}

	// Services select the right pods on existing named ports.
	for _, tc := range []struct {
		svc      string
		pods     labels.Set
		other    labels.Set
		c        corev1.Container
		headless bool
	}{
		{"emptydir-exporter", expLabels, remLabels, exp, true},
		{"emptydir-remediator", remLabels, expLabels, rem, false},
	} {
		svc := find[*corev1.Service](m, tc.svc)
		if svc == nil {
			t.Errorf("no Service %s", tc.svc)
			continue
		}
		s := labels.SelectorFromSet(svc.Spec.Selector)
		if len(svc.Spec.Selector) == 0 || !s.Matches(tc.pods) || s.Matches(tc.other) {
			t.Errorf("Service %s selector %v", tc.svc, svc.Spec.Selector)
		}
		if (svc.Spec.ClusterIP == corev1.ClusterIPNone) != tc.headless {
			t.Errorf("Service %s clusterIP %q, headless %v", tc.svc, svc.Spec.ClusterIP, tc.headless)
		}
		for _, p := range svc.Spec.Ports {
			cp, ok := namedPort(tc.c, p.TargetPort.String())
			if !ok || cp != p.Port {
				t.Errorf("Service %s port %d targets %q, container port %d (found %v)", tc.svc, p.Port, p.TargetPort.String(), cp, ok)
			}
		}
	}

	// Probes hit the documented endpoints on named ports of their own container.
	for _, tc := range []struct {
		what string
		c    corev1.Container
	}{{"exporter", exp}, {"remediator", rem}} {
		for probe, want := range map[*corev1.Probe]string{tc.c.LivenessProbe: "/healthz", tc.c.ReadinessProbe: "/readyz"} {
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want {
				t.Errorf("%s: probe %+v, want an httpGet of %s", tc.what, probe, want)
				continue
			}
			if _, ok := namedPort(tc.c, probe.HTTPGet.Port.String()); !ok {
				t.Errorf("%s: probe port %q is not a named port", tc.what, probe.HTTPGet.Port.String())
			}
		}
	}

	// Service accounts exist, pods use them, bindings bind them to existing roles.
	for _, spec := range []corev1.PodSpec{ds.Spec.Template.Spec, d.Spec.Template.Spec} {
		if find[*corev1.ServiceAccount](m, spec.ServiceAccountName) == nil {
			t.Errorf("pods use ServiceAccount %q, which the base does not create", spec.ServiceAccountName)
		}
	}
	checkBinding := func(kind, name string, ref rbacv1.RoleRef, subjects []rbacv1.Subject) {
		switch ref.Kind {
		case "ClusterRole":
			if find[*rbacv1.ClusterRole](m, ref.Name) == nil {
				t.Errorf("%s %s: ClusterRole %s missing", kind, name, ref.Name)
			}
		case "Role":
			if find[*rbacv1.Role](m, ref.Name) == nil {
				t.Errorf("%s %s: Role %s missing", kind, name, ref.Name)
			}
		}
		for _, s := range subjects {
			if s.Kind != "ServiceAccount" || s.Namespace != deploy.Namespace || find[*corev1.ServiceAccount](m, s.Name) == nil {
				t.Errorf("%s %s: subject %+v is not a ServiceAccount of the base", kind, name, s)
			}
		}
	}
	for _, b := range all[*rbacv1.ClusterRoleBinding](m) {
		checkBinding("ClusterRoleBinding", b.Name, b.RoleRef, b.Subjects)
	}
	for _, b := range all[*rbacv1.RoleBinding](m) {
		checkBinding("RoleBinding", b.Name, b.RoleRef, b.Subjects)
	}

	// The webhook token file comes from the Secret of the example.
	tokenFile, ok := argValue(rem.Args, "web.bearer-token-file")
	if !ok {
		t.Fatal("the remediator runs without --web.bearer-token-file: anyone could trigger evictions")
	}
	secObjs, err := deploy.DecodeFile(deploy.WebhookSecretExample)
	if err != nil {
		t.Fatal(err)
	}
	secret := secObjs[0].(*corev1.Secret)
	if !mountedFromSecret(d.Spec.Template.Spec, rem, tokenFile, secret) {
		t.Errorf("--web.bearer-token-file=%s is not the key of Secret %s mounted in the remediator", tokenFile, secret.Name)
	}

	// The exporter's --kubelet.root-dir/pods is a read-only hostPath with HostToContainer.
	root, _ := argValue(exp.Args, "kubelet.root-dir")
	if root == "" {
		root = "/var/lib/kubelet"
	}
	var found bool
	for _, vm := range exp.VolumeMounts {
		if vm.MountPath == root+"/pods" || vm.MountPath == root {
			found = true
			v := volume(ds.Spec.Template.Spec, vm.Name)
			if v == nil || v.HostPath == nil {
				t.Errorf("mount %s is not a hostPath", vm.MountPath)
			}
			if !vm.ReadOnly || vm.MountPropagation == nil || *vm.MountPropagation != corev1.MountPropagationHostToContainer {
				t.Errorf("mount %s: readOnly %v propagation %v, want read-only HostToContainer", vm.MountPath, vm.ReadOnly, vm.MountPropagation)
			}
		}
	}
	if !found {
		t.Errorf("nothing is mounted at --kubelet.root-dir=%s (or its pods folder)", root)
	}
}

func volume(spec corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

func mountedFromSecret(spec corev1.PodSpec, c corev1.Container, file string, secret *corev1.Secret) bool {
	for _, vm := range c.VolumeMounts {
		rel, err := filepath.Rel(vm.MountPath, file)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		v := volume(spec, vm.Name)
		if v == nil || v.Secret == nil || v.Secret.SecretName != secret.Name {
			continue
		}
		for _, it := range v.Secret.Items {
			if it.Path == rel {
				_, inData := secret.Data[it.Key]
				_, inString := secret.StringData[it.Key]
				return inData || inString
			}
		}
		if len(v.Secret.Items) == 0 {
			_, inString := secret.StringData[rel]
			return inString
		}
	}
	return false
}

// ---- security ----

func TestSecurityPosture(t *testing.T) {
	m := loadBase(t)
	ds := exporterDS(t, m)
	d := remediatorDeploy(t, m)
	for _, tc := range []struct {
		what    string
		spec    corev1.PodSpec
		addCaps []corev1.Capability
		root    bool
	}{
		// The exporter reads every pod's files: uid 0 with DAC_READ_SEARCH only.
		{"exporter", ds.Spec.Template.Spec, []corev1.Capability{"DAC_READ_SEARCH"}, true},
		{"remediator", d.Spec.Template.Spec, nil, false},
	} {
		spec := tc.spec
		if spec.HostNetwork || spec.HostPID || spec.HostIPC {
			t.Errorf("%s shares a host namespace", tc.what)
		}
		if spec.AutomountServiceAccountToken != nil && !*spec.AutomountServiceAccountToken {
			t.Errorf("%s: needs its service account token", tc.what)
		}
		for _, c := range spec.Containers {
			sc := c.SecurityContext
			if sc == nil {
				t.Errorf("%s/%s: no securityContext", tc.what, c.Name)
				continue
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("%s/%s: root filesystem is writable", tc.what, c.Name)
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s/%s: allowPrivilegeEscalation is not false", tc.what, c.Name)
			}
			if sc.Privileged != nil && *sc.Privileged {
				t.Errorf("%s/%s: privileged", tc.what, c.Name)
			}
			if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(sc.Capabilities.Add, tc.addCaps) {
				t.Errorf("%s/%s: capabilities %+v, want drop [ALL] add %v", tc.what, c.Name, sc.Capabilities, tc.addCaps)
			}
			uid := sc.RunAsUser
			if uid == nil && spec.SecurityContext != nil {
				uid = spec.SecurityContext.RunAsUser
			}
			if tc.root != (uid != nil && *uid == 0) {
				t.Errorf("%s/%s: runAsUser %v", tc.what, c.Name, uid)
			}
			if !tc.root {
				nonRoot := sc.RunAsNonRoot
				if nonRoot == nil && spec.SecurityContext != nil {
					nonRoot = spec.SecurityContext.RunAsNonRoot
				}
				if nonRoot == nil || !*nonRoot {
					t.Errorf("%s/%s: runAsNonRoot is not set", tc.what, c.Name)
				}
			}
			for _, vm := range c.VolumeMounts {
				if !vm.ReadOnly {
					t.Errorf("%s/%s: mount %s is writable", tc.what, c.Name, vm.MountPath)
				}
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s/%s: resources %+v, want cpu and memory requests and a memory limit", tc.what, c.Name, c.Resources)
			}
		}
	}
	if ds.Spec.Template.Spec.Tolerations == nil || ds.Spec.Template.Spec.Tolerations[0].Operator != corev1.TolerationOpExists {
		t.Errorf("the exporter must tolerate every taint, to run on every node")
	}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil && !strings.HasSuffix(v.HostPath.Path, "/pods") {
			t.Errorf("hostPath %s: mount only the kubelet's pods folder, not its whole root (pki, plugins)", v.HostPath.Path)
		}
	}
}

// ---- RBAC ----

type perm struct{ ns, group, resource, verb string }

func (p perm) String() string {
	ns := p.ns
	if ns == "" {
		ns = "cluster-wide"
	}
	return fmt.Sprintf("%s %s.%s (%s)", p.verb, p.resource, p.group, ns)
}

// ruleAllowsName reports whether rule r grants p on the object name (any object when name
// is ""): a rule limited by resourceNames allows only those names.
func ruleAllowsName(r rbacv1.PolicyRule, p perm, name string) bool {
	if len(r.ResourceNames) > 0 && (name == "" || !slices.Contains(r.ResourceNames, name)) {
		return false
	}
	match := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	return match(r.APIGroups, p.group) && match(r.Resources, p.resource) && match(r.Verbs, p.verb)
}

// allowed evaluates the RBAC objects of objs for a ServiceAccount of deploy.Namespace.
// p.ns "" asks for a cluster-wide permission (only ClusterRoleBindings give those).
func allowed(objs []runtime.Object, sa string, p perm) bool { return allowedName(objs, sa, p, "") }

// allowedName is allowed for the object name ("": any object of the resource).
func allowedName(objs []runtime.Object, sa string, p perm, name string) bool {
	m := manifests{objs}
	ruleAllows := func(r rbacv1.PolicyRule, p perm) bool { return ruleAllowsName(r, p, name) }
	bound := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == deploy.Namespace
		})
	}
	rules := func(ref rbacv1.RoleRef, ns string) []rbacv1.PolicyRule {
		if ref.Kind == "ClusterRole" {
			if cr := find[*rbacv1.ClusterRole](m, ref.Name); cr != nil {
				return cr.Rules
			}
		} else if r := find[*rbacv1.Role](m, ref.Name); r != nil && r.Namespace == ns {
			return r.Rules
		}
		return nil
	}
	for _, b := range all[*rbacv1.ClusterRoleBinding](m) {
		if bound(b.Subjects) && slices.ContainsFunc(rules(b.RoleRef, ""), func(r rbacv1.PolicyRule) bool { return ruleAllows(r, p) }) {
			return true
		}
	}
	if p.ns == "" {
		return false
	}
	for _, b := range all[*rbacv1.RoleBinding](m) {
		if b.Namespace == p.ns && bound(b.Subjects) && slices.ContainsFunc(rules(b.RoleRef, b.Namespace), func(r rbacv1.PolicyRule) bool { return ruleAllows(r, p) }) {
			return true
		}
	}
	return false
}

// docsRBAC reads the RBAC block of docs/remediator.md: the permissions the remediator's
// author says it needs.
func docsRBAC(t *testing.T) []runtime.Object {
	t.Helper()
	b, err := os.ReadFile("../docs/remediator.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## RBAC")
	if !ok {
		t.Fatal("docs/remediator.md has no RBAC section")
	}
	_, block, ok := strings.Cut(sec, "```yaml\n")
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok {
		t.Fatal("docs/remediator.md: no yaml block in the RBAC section")
	}
	objs, err := deploy.Decode([]byte(block))
	if err != nil {
		t.Fatalf("docs/remediator.md RBAC block: %v", err)
	}
	return objs
}

func TestRBAC(t *testing.T) {
	m := loadBase(t)
	ns := deploy.Namespace

	// The remediator: everything docs/remediator.md lists, at the scope the base needs it.
	// Deliberate narrowings, each with its reason:
	narrowed := map[string]string{
		"list pods.":       "own-namespace", // exporter discovery: --exporter.namespace is its own namespace
		"watch pods.":      "unused",        // the remediator GETs pods per alert and LISTs exporters; it watches nothing
		"get nodes/proxy.": "denied",        // only --measurement.source=kubelet, which the base does not use
	}
	var checked int
	for _, o := range docsRBAC(t) {
		var rules []rbacv1.PolicyRule
		scope := ""
		switch r := o.(type) {
		case *rbacv1.ClusterRole:
			rules = r.Rules
		case *rbacv1.Role:
			rules, scope = r.Rules, r.Namespace
		default:
			t.Fatalf("docs RBAC: unexpected %T", o)
		}
		for _, r := range rules {
			if len(r.ResourceNames) > 0 {
				// Named objects in the remediator's own namespace (the ledger ConfigMap).
				for _, name := range r.ResourceNames {
					for _, g := range r.APIGroups {
						for _, res := range r.Resources {
							for _, v := range r.Verbs {
								checked++
								if p := (perm{ns, g, res, v}); !allowedName(m.objs, "emptydir-remediator", p, name) {
									t.Errorf("remediator lacks %s of %q (docs/remediator.md lists it)", p, name)
								}
							}
						}
					}
				}
				continue
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						checked++
						p := perm{scope, g, res, v}
						key := fmt.Sprintf("%s %s.%s", v, res, g)
						switch narrowed[key] {
						case "own-namespace":
							if !allowed(m.objs, "emptydir-remediator", perm{ns, g, res, v}) {
								t.Errorf("remediator lacks %s in its namespace", key)
							}
						case "unused":
						case "denied":
							if allowed(m.objs, "emptydir-remediator", p) {
								t.Errorf("remediator has %s, which the base does not need", p)
							}
						default:
							if !allowed(m.objs, "emptydir-remediator", p) {
								t.Errorf("remediator lacks %s (docs/remediator.md lists it)", p)
							}
						}
					}
				}
			}
		}
	}
	if checked < 8 {
		t.Errorf("only %d permissions read from docs/remediator.md", checked)
	}

	// The exporter: its informer lists and watches pods of every namespace (its node's).
	for _, p := range []perm{{"", "", "pods", "list"}, {"", "", "pods", "watch"}} {
		if !allowed(m.objs, "emptydir-exporter", p) {
			t.Errorf("exporter lacks %s", p)
		}
	}

	// Neither may do more than that: spot checks of what an attacker would want.
	for _, sa := range []string{"emptydir-exporter", "emptydir-remediator"} {
		for _, p := range []perm{
			{"", "", "secrets", "get"}, {ns, "", "secrets", "get"}, {"", "", "pods", "delete"},
			{"", "", "pods/exec", "create"}, {"", "", "nodes/proxy", "get"}, {"", "", "pods", "update"},
			perm{"", "", "pods", "list"}.withSA(sa, "emptydir-remediator"), {"", "", "nodes", "get"},
			{"", "coordination.k8s.io", "leases", "update"}, {"", "", "configmaps", "get"},
			{ns, "", "configmaps", "get"}, {ns, "", "configmaps", "update"}, // only the ledger, by name
			{ns, "coordination.k8s.io", "leases", "get"}, {ns, "coordination.k8s.io", "leases", "update"}, // only its Lease, by name
		} {
			if p.verb == "" {
				continue
			}
			if allowed(m.objs, sa, p) {
				t.Errorf("%s may %s", sa, p)
			}
		}
	}
	if allowed(m.objs, "emptydir-exporter", perm{"", "", "pods/eviction", "create"}) {
		t.Error("the exporter may evict")
	}
	for _, cr := range all[*rbacv1.ClusterRole](m) {
		for _, r := range cr.Rules {
			if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
				t.Errorf("ClusterRole %s has a wildcard rule %+v", cr.Name, r)
			}
		}
	}
}

// withSA blanks p (a zero verb is skipped) when sa is skip: the remediator lists pods, but
// only in its namespace, so "cluster-wide list" is checked for it here and not for the exporter.
func (p perm) withSA(sa, only string) perm {
	if sa != only {
		return perm{}
	}
	return p
}

// ---- commands ----

// imageBinDir is where the image holds the commands (the Dockerfile's final stage, and the
// image the e2e install tests run these manifests from).
const imageBinDir = "/usr/local/bin"

// TestManifestsRunEveryCommand: each command of cmd/ runs in a workload of the base, from the
// image's directory, and no workload runs anything else.
func TestManifestsRunEveryCommand(t *testing.T) {
	cmds, err := os.ReadDir("../cmd")
	if err != nil {
		t.Fatal(err)
	}
	base := loadBase(t)
	runs := map[string]bool{}
	for _, c := range exporterDS(t, base).Spec.Template.Spec.Containers {
		runs[c.Command[0]] = true
	}
	for _, c := range remediatorDeploy(t, base).Spec.Template.Spec.Containers {
		runs[c.Command[0]] = true
	}
	for _, c := range cmds {
		if !c.IsDir() {
			continue
		}
		p := path.Join(imageBinDir, c.Name())
		if !runs[p] {
			t.Errorf("no manifest runs %s", p)
		}
		delete(runs, p)
	}
	if len(runs) > 0 {
		t.Errorf("manifests run %v, which are not commands of cmd/ in %s", runs, imageBinDir)
	}
}

// ---- kustomize (optional: needs kubectl) ----

func kustomize(t *testing.T, dir string, extra ...string) []runtime.Object {
	t.Helper()
	out, err := exec.Command("kubectl", append([]string{"kustomize"}, append(extra, dir)...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, ee.Stderr)
		}
		t.Fatal(err)
	}
	objs, err := deploy.Decode(out)
	if err != nil {
		t.Fatalf("decoding kustomize output: %v", err)
	}
	return objs
}

func names(objs []runtime.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetObjectKind().GroupVersionKind().Kind+"/"+o.(metav1.Object).GetName())
	}
	sort.Strings(out)
	return out
}

func TestKustomizeBuild(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not on PATH: kustomize rendering not checked")
	}
	deployDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	rendered := kustomize(t, deployDir)
	if got, want := names(rendered), names(loadBase(t).objs); !slices.Equal(got, want) {
		t.Errorf("kustomize renders %v, the base decodes to %v", got, want)
	}

	// An overlay with every component (kustomize wants relative paths, outside the base).
	overlay := t.TempDir()
	rel, err := filepath.Rel(overlay, deployDir)
	if err != nil {
		t.Fatal(err)
	}
	comps, err := deploy.Files.ReadDir("components")
	if err != nil {
		t.Fatal(err)
	}
	// kubelet-source patches the exporter's PodMonitor, so it comes after monitoring (as its
	// kustomization.yaml says): kustomize applies components in the order listed.
	var ordered []string
	for _, c := range comps {
		if c.Name() != "kubelet-source" {
			ordered = append(ordered, c.Name())
		}
	}
	ordered = append(ordered, "kubelet-source")
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [" + rel + "]\ncomponents:\n"
	for _, c := range ordered {
		k += "  - " + rel + "/components/" + c + "\n"
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	full := kustomize(t, overlay, "--load-restrictor=LoadRestrictionsNone")
	got := strings.Join(names(full), " ")
	collection := ""
	for _, want := range []string{"PodMonitor/emptydir-exporter", "PodMonitor/emptydir-remediator", "PrometheusRule/emptydir-guard",
		"ClusterRole/emptydir-exporter-kubelet", "ClusterRoleBinding/emptydir-exporter-kubelet"} {
		if !strings.Contains(got, want) {
			t.Errorf("with all components: %s missing from %s", want, got)
		}
	}
	for _, o := range full {
		if ds, ok := o.(*appsv1.DaemonSet); ok {
			if v, _ := argValue(ds.Spec.Template.Spec.Containers[0].Args, "collection.source"); v != "kubelet" {
				t.Errorf("kubelet-source component: exporter args %v", ds.Spec.Template.Spec.Containers[0].Args)
			}
			collection, _ = argValue(ds.Spec.Template.Spec.Containers[0].Args, "collection.interval")
		}
		if u, ok := o.(*unstructured.Unstructured); ok && u.GetKind() == "PodMonitor" {
			checkPodMonitor(t, u, loadBase(t))
		}
	}
	// Scraped at its collection interval: faster would only repeat the kubelet's samples.
	if got := exporterScrapeInterval(t, full); got != collection || got != "30s" {
		t.Errorf("kubelet-source component: exporter scraped every %q, collected every %q; want both 30s", got, collection)
	}
	// The kubelet-source component grants what the kubelet asks for /stats/summary.
	if !allowed(full, "emptydir-exporter", perm{"", "", "nodes/stats", "get"}) {
		t.Error("kubelet-source component: the exporter lacks get nodes/stats")
	}
	if allowed(full, "emptydir-exporter", perm{"", "", "nodes/proxy", "get"}) {
		t.Error("kubelet-source component grants nodes/proxy, which the direct kubelet URL does not need")
	}
}

// exporterScrapeInterval is the interval of the exporter's PodMonitor endpoint.
func exporterScrapeInterval(t *testing.T, objs []runtime.Object) string {
	t.Helper()
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok && u.GetKind() == "PodMonitor" && u.GetName() == "emptydir-exporter" {
			eps, _, _ := unstructured.NestedSlice(u.Object, "spec", "podMetricsEndpoints")
			if len(eps) != 1 {
				t.Fatalf("PodMonitor emptydir-exporter: %d endpoints, want 1", len(eps))
			}
			interval, _ := eps[0].(map[string]any)["interval"].(string)
			return interval
		}
	}
	t.Fatal("no PodMonitor emptydir-exporter")
	return ""
}

// checkPodMonitor: its selector picks the pods of one workload and its port is theirs.
func checkPodMonitor(t *testing.T, u *unstructured.Unstructured, m manifests) {
	t.Helper()
	ml, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
	eps, _, _ := unstructured.NestedSlice(u.Object, "spec", "podMetricsEndpoints")
	var spec corev1.PodSpec
	var podLabels labels.Set
	switch u.GetName() {
	case "emptydir-exporter":
		ds := exporterDS(t, m)
		spec, podLabels = ds.Spec.Template.Spec, ds.Spec.Template.Labels
	case "emptydir-remediator":
		d := remediatorDeploy(t, m)
		spec, podLabels = d.Spec.Template.Spec, d.Spec.Template.Labels
	default:
		t.Errorf("unexpected PodMonitor %s", u.GetName())
		return
	}
	if len(ml) == 0 || !labels.SelectorFromSet(ml).Matches(podLabels) {
		t.Errorf("PodMonitor %s selector %v does not select %v", u.GetName(), ml, podLabels)
	}
	for _, e := range eps {
		port, _ := e.(map[string]any)["port"].(string)
		if _, ok := namedPort(spec.Containers[0], port); !ok {
			t.Errorf("PodMonitor %s: port %q is not a named container port", u.GetName(), port)
		}
	}
}

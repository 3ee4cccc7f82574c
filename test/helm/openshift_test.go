package helmchart_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
	helmchart "github.com/emptydir-guard/emptydir-guard/test/helm"
)

// scc is the exporter's SecurityContextConstraints in r, or nil.
func scc(r rendered) *unstructured.Unstructured {
	for _, o := range r.objs {
		if u, ok := o.(*unstructured.Unstructured); ok && u.GetKind() == "SecurityContextConstraints" {
			return u
		}
	}
	return nil
}

// sccFields are the fields of an SCC the tests pin, as JSON-ish values.
func sccFields(u *unstructured.Unstructured) map[string]any {
	out := map[string]any{}
	for k, v := range u.Object {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			out[k] = v
		}
	}
	return out
}

// sccAdmits says why the exporter pod spec does not fit the SCC's fields (nil: it does), as
// OpenShift's admission would check them: volume types, added capabilities, host namespaces,
// uid, SELinux type, read-only root.
func sccAdmits(f map[string]any, spec corev1.PodSpec) error {
	strs := func(v any) []string {
		var out []string
		for _, x := range v.([]any) {
			out = append(out, x.(string))
		}
		return out
	}
	for _, v := range spec.Volumes {
		b, _ := yaml.Marshal(v.VolumeSource)
		var m map[string]any
		_ = yaml.Unmarshal(b, &m)
		for typ := range m {
			if !slices.Contains(strs(f["volumes"]), typ) {
				return fmt.Errorf("volume %s of type %s not in %v", v.Name, typ, f["volumes"])
			}
			if typ == "hostPath" && f["allowHostDirVolumePlugin"] != true {
				return fmt.Errorf("hostPath %s without allowHostDirVolumePlugin", v.Name)
			}
		}
	}
	if spec.HostPID && f["allowHostPID"] != true || spec.HostNetwork || spec.HostIPC {
		return fmt.Errorf("host namespaces: pid %v, allowHostPID %v", spec.HostPID, f["allowHostPID"])
	}
	sc := spec.Containers[0].SecurityContext
	if sc.Capabilities != nil {
		for _, c := range sc.Capabilities.Add {
			if !slices.Contains(strs(f["allowedCapabilities"]), string(c)) {
				return fmt.Errorf("capability %s not in %v", c, f["allowedCapabilities"])
			}
		}
	}
	ru := f["runAsUser"].(map[string]any)
	if ru["type"] != "MustRunAs" || sc.RunAsUser == nil || fmt.Sprint(ru["uid"]) != fmt.Sprint(*sc.RunAsUser) {
		return fmt.Errorf("runAsUser %v, the container's %v", ru, sc.RunAsUser)
	}
	se := f["seLinuxContext"].(map[string]any)
	want, got := "", ""
	if o, ok := se["seLinuxOptions"].(map[string]any); ok {
		want = fmt.Sprint(o["type"])
	}
	if sc.SELinuxOptions != nil {
		got = sc.SELinuxOptions.Type
	}
	if se["type"] != "MustRunAs" || want != got {
		return fmt.Errorf("seLinuxContext %v, the container's type %q", se, got)
	}
	if f["readOnlyRootFilesystem"] == true && (sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem) {
		return fmt.Errorf("readOnlyRootFilesystem required, the container's %v", sc.ReadOnlyRootFilesystem)
	}
	return nil
}

// TestOpenShiftSCC: with preset openshift, or where the cluster serves
// security.openshift.io/v1, the chart renders a SecurityContextConstraints granting exactly what
// the exporter pod asks (every field pinned: read-only hostPaths, its capabilities, uid 0, the
// SELinux type spc_t that lets it read the pods' files, nothing else), the exporter's
// ServiceAccount may use it and no other, the remediator's may use nonroot-v2 only; the pod fits
// it. An explicit SELinux type wins; the kubelet source gets neither hostPaths, capability, root
// nor spc_t. Every other preset renders none of it.
func TestOpenShiftSCC(t *testing.T) {
	strict := map[string]any{
		"priority": nil, "allowHostDirVolumePlugin": true, "allowHostIPC": false, "allowHostNetwork": false,
		"allowHostPID": false, "allowHostPorts": false, "allowPrivilegeEscalation": false, "allowPrivilegedContainer": false,
		"allowedCapabilities": []any{"DAC_READ_SEARCH"}, "defaultAddCapabilities": nil, "requiredDropCapabilities": []any{"ALL"},
		"readOnlyRootFilesystem": true, "runAsUser": map[string]any{"type": "MustRunAs", "uid": int64(0)},
		"seLinuxContext": map[string]any{"type": "MustRunAs", "seLinuxOptions": map[string]any{"type": "spc_t"}},
		"fsGroup":        map[string]any{"type": "RunAsAny"}, "supplementalGroups": map[string]any{"type": "RunAsAny"},
		"seccompProfiles": []any{"runtime/default"}, "volumes": []any{"emptyDir", "hostPath", "projected"},
		"users": []any{}, "groups": []any{},
	}
	with := func(base map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		values      string
		apiVersions []string
		want        map[string]any // nil: no SCC
	}{
		{"preset: openshift", nil, strict},
		{"preset: generic", []string{"security.openshift.io/v1"}, strict},
		{"{preset: openshift, exporter: {openFiles: {enabled: true}, projectQuota: {enabled: true}}}", nil,
			with(strict, "allowHostPID", true, "allowedCapabilities", []any{"DAC_READ_SEARCH", "SYS_ADMIN", "SYS_PTRACE"})},
		{"{preset: openshift, exporter: {securityContext: {seLinuxOptions: {type: super_t}}}}", nil,
			with(strict, "seLinuxContext", map[string]any{"type": "MustRunAs", "seLinuxOptions": map[string]any{"type": "super_t"}})},
		{"{preset: openshift, exporter: {webConfig: {basic_auth_users: {a: b}}, extraVolumes: [{name: certs, configMap: {name: c}}]}}", nil,
			with(strict, "volumes", []any{"configMap", "emptyDir", "hostPath", "projected", "secret"})},
		{"{preset: openshift, exporter: {source: kubelet}}", nil,
			with(strict, "allowHostDirVolumePlugin", false, "allowedCapabilities", []any{}, "runAsUser", map[string]any{"type": "MustRunAs", "uid": int64(65532)},
				"seLinuxContext", map[string]any{"type": "MustRunAs"}, "volumes", []any{"projected"})},
		{"preset: generic", nil, nil},
		{"preset: k0s", nil, nil},
		{"preset: minikube", nil, nil},
		{"preset: gke-autopilot", nil, nil},
	} {
		t.Run(tc.values+" "+strings.Join(tc.apiVersions, ","), func(t *testing.T) {
			rel := release("guard")
			if tc.apiVersions != nil {
				rel.Cluster = &helmchart.Cluster{APIResources: tc.apiVersions}
			}
			if err := yaml.Unmarshal([]byte(tc.values), &rel.Values); err != nil {
				t.Fatal(err)
			}
			r := render(t, rel)
			spec := deploytest.ExporterDaemonSet(t, r.objs, "guard-emptydir-exporter").Spec.Template.Spec
			useSCC := func(sa, name string) bool {
				a := deploytest.Perm("", "security.openshift.io", "securitycontextconstraints", "use")
				a.Name = name
				return r.allowed(sa, a)
			}
			u := scc(r)
			if tc.want == nil {
				if u != nil {
					t.Fatalf("an SCC %s, want none", u.GetName())
				}
				if sc := spec.Containers[0].SecurityContext; sc != nil && sc.SELinuxOptions != nil {
					t.Errorf("seLinuxOptions %+v off OpenShift", sc.SELinuxOptions)
				}
				for _, kn := range deploytest.KindNames(r.objs) {
					if strings.HasSuffix(kn, "-scc") {
						t.Errorf("%s off OpenShift", kn)
					}
				}
				return
			}
			if u == nil {
				t.Fatal("no SecurityContextConstraints")
			}
			if got := sccFields(u); !equalJSON(got, tc.want) {
				g, _ := yaml.Marshal(got)
				w, _ := yaml.Marshal(tc.want)
				t.Errorf("SCC %s:\n%s\nwant\n%s", u.GetName(), g, w)
			}
			if err := sccAdmits(sccFields(u), spec); err != nil {
				t.Errorf("the exporter pod does not fit its SCC: %v", err)
			}
			if !useSCC("guard-emptydir-exporter", u.GetName()) || useSCC("guard-emptydir-exporter", "privileged") || useSCC("guard-emptydir-exporter", "nonroot-v2") {
				t.Errorf("the exporter may use its SCC %v, privileged %v, nonroot-v2 %v; want only its own",
					useSCC("guard-emptydir-exporter", u.GetName()), useSCC("guard-emptydir-exporter", "privileged"), useSCC("guard-emptydir-exporter", "nonroot-v2"))
			}
			if !useSCC("guard-emptydir-remediator", "nonroot-v2") || useSCC("guard-emptydir-remediator", u.GetName()) || useSCC("guard-emptydir-remediator", "privileged") {
				t.Error("the remediator must use nonroot-v2 and no other SCC")
			}
		})
	}
}

// equalJSON compares decoded YAML values, numbers by their printed form.
func equalJSON(a, b any) bool {
	ja, _ := yaml.Marshal(a)
	jb, _ := yaml.Marshal(b)
	return string(ja) == string(jb)
}

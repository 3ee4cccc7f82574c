package helmchart_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
	helmchart "github.com/emptydir-guard/emptydir-guard/test/helm"
)

func wantArgs(t *testing.T, what string, args []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(args, w) {
			t.Errorf("%s args %v lack %s", what, args, w)
		}
	}
}

// checkWiring: what holds for every rendering with both components: the remediator finds
// the exporter pods, Services and PodMonitors select their pods, the token volume has its
// Secret, and the ServiceAccounts are bound in the release namespace.
func checkWiring(t *testing.T, r rendered, ns, exp, rem string) {
	t.Helper()
	ds, d := deploytest.ExporterDaemonSet(t, r.objs, exp), deploytest.RemediatorDeployment(t, r.objs, rem)
	args := d.Spec.Template.Spec.Containers[0].Args
	if sel := deploytest.ArgValues(args, "exporter.selector"); len(sel) == 1 {
		s, err := labels.Parse(sel[0])
		if err != nil || !s.Matches(labels.Set(ds.Spec.Template.Labels)) {
			t.Errorf("--exporter.selector=%s (%v) does not select the exporter pods %v", sel[0], err, ds.Spec.Template.Labels)
		}
		if s.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("--exporter.selector=%s selects the remediator pods", sel[0])
		}
		var port int32
		for _, p := range ds.Spec.Template.Spec.Containers[0].Ports {
			port = p.ContainerPort
		}
		if got := deploytest.ArgValues(args, "exporter.port"); len(got) != 1 || got[0] != strconv.Itoa(int(port)) {
			t.Errorf("--exporter.port %v, the exporter listens on %d", got, port)
		}
	}
	for _, o := range r.objs {
		m := o.(metav1.Object)
		if m.GetLabels()["app.kubernetes.io/part-of"] != "emptydir-guard" {
			t.Errorf("%T %s lacks app.kubernetes.io/part-of", o, m.GetName())
		}
		if _, isNS := map[string]bool{"ClusterRole": true, "ClusterRoleBinding": true,
			"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true}[o.GetObjectKind().GroupVersionKind().Kind]; !isNS && m.GetNamespace() != ns {
			t.Errorf("%T %s in namespace %q, want %q", o, m.GetName(), m.GetNamespace(), ns)
		}
		switch v := o.(type) {
		case *corev1.Service:
			s := labels.SelectorFromSet(v.Spec.Selector)
			if !s.Matches(labels.Set(ds.Spec.Template.Labels)) && !s.Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("Service %s selects no pods", v.Name)
			}
		case *policyv1.PodDisruptionBudget:
			if s, _ := metav1.LabelSelectorAsSelector(v.Spec.Selector); !s.Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("PodDisruptionBudget %s does not select the remediator pods", v.Name)
			}
		case *rbacv1.ClusterRoleBinding:
			for _, s := range v.Subjects {
				if s.Namespace != ns {
					t.Errorf("ClusterRoleBinding %s binds %s/%s", v.Name, s.Namespace, s.Name)
				}
			}
		case *unstructured.Unstructured:
			if v.GetKind() == "PodMonitor" || v.GetKind() == "ServiceMonitor" {
				ml, _, _ := unstructured.NestedStringMap(v.Object, "spec", "selector", "matchLabels")
				target := labels.Set(ds.Spec.Template.Labels)
				if strings.Contains(v.GetName(), "remediator") {
					target = labels.Set(d.Spec.Template.Labels)
				}
				if len(ml) == 0 || !labels.SelectorFromSet(ml).Matches(target) {
					t.Errorf("%s %s selector %v", v.GetKind(), v.GetName(), ml)
				}
				// The rules' job selectors (rules/emptydir-guard.rules.yml): the operator names
				// the job <namespace>/<name> (PodMonitor) or after the Service.
				if strings.Contains(v.GetName(), "exporter") && !strings.Contains(v.GetName(), "emptydir-exporter") {
					t.Errorf("%s %s: the job would not match the rules' .*emptydir-exporter.*", v.GetKind(), v.GetName())
				}
			}
		}
	}
	var secretName, key string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "webhook-token" && v.Secret != nil && len(v.Secret.Items) == 1 {
			secretName, key = v.Secret.SecretName, v.Secret.Items[0].Key
		}
	}
	if secretName == "" {
		t.Fatalf("the remediator mounts no webhook token Secret")
	}
	if s := find[*corev1.Secret](r, secretName); s != nil && len(s.Data[key]) < 32 {
		t.Errorf("generated Secret %s: key %q holds %d bytes", secretName, key, len(s.Data[key]))
	}
	for _, pair := range [][2]string{{exp, "DaemonSet"}, {rem, "Deployment"}} {
		if find[*corev1.ServiceAccount](r, pair[0]) == nil {
			t.Errorf("no ServiceAccount %s for the %s", pair[0], pair[1])
		}
	}
	if ds.Spec.Template.Spec.ServiceAccountName != exp || d.Spec.Template.Spec.ServiceAccountName != rem {
		t.Errorf("pods run as %s and %s", ds.Spec.Template.Spec.ServiceAccountName, d.Spec.Template.Spec.ServiceAccountName)
	}
	lease := rem
	if l := deploytest.ArgValues(args, "leader-elect.lease-name"); len(l) == 1 {
		lease = l[0]
	}
	updateLease := deploytest.Perm(ns, "coordination.k8s.io", "leases", "update")
	updateLease.Name = lease
	if !r.allowed(exp, deploytest.Perm("", "", "pods", "watch")) || !r.allowed(rem, deploytest.Perm("", "", "pods/eviction", "create")) || !r.allowed(rem, updateLease) {
		t.Error("a ServiceAccount lacks what it needs (pods watch and pods/eviction create cluster-wide, update of its Lease)")
	}
	for _, sa := range []string{exp, rem} {
		for _, rv := range [][2]string{{"pods", "delete"}, {"secrets", "get"}, {"pods/exec", "create"}} {
			if r.allowedAnywhere(sa, deploytest.Perm("", "", rv[0], rv[1])) {
				t.Errorf("%s may %s %s", sa, rv[1], rv[0])
			}
		}
	}
}

func hostPaths(spec corev1.PodSpec) []string {
	var out []string
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			out = append(out, v.HostPath.Path)
		}
	}
	return out
}

func TestRender(t *testing.T) {
	rulesWant := func(t *testing.T) map[string]any {
		b, err := os.ReadFile(filepath.Join(root, "rules/prometheusrule.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var pr map[string]any
		if err := yaml.Unmarshal(b, &pr); err != nil {
			t.Fatal(err)
		}
		return pr["spec"].(map[string]any)
	}
	for _, tc := range []struct {
		name     string
		release  helmchart.Release
		exp, rem string
		check    func(t *testing.T, r rendered)
	}{{
		name: "defaults, release named like the chart", release: release("emptydir-guard"),
		exp: "emptydir-exporter", rem: "emptydir-remediator",
		check: func(t *testing.T, r rendered) {
			want := []string{"ClusterRole/emptydir-exporter", "ClusterRole/emptydir-remediator",
				"ClusterRoleBinding/emptydir-exporter", "ClusterRoleBinding/emptydir-remediator",
				"DaemonSet/emptydir-exporter", "Deployment/emptydir-remediator",
				"NetworkPolicy/emptydir-exporter", "NetworkPolicy/emptydir-remediator", "PodDisruptionBudget/emptydir-remediator",
				"Role/emptydir-remediator", "RoleBinding/emptydir-remediator", "Secret/emptydir-remediator-webhook",
				"Service/emptydir-exporter", "Service/emptydir-remediator", "ServiceAccount/emptydir-exporter", "ServiceAccount/emptydir-remediator"}
			if got := deploytest.KindNames(r.objs); !slices.Equal(got, want) {
				t.Errorf("objects\n got %v\nwant %v", got, want)
			}
			ds := deploytest.ExporterDaemonSet(t, r.objs, "emptydir-exporter")
			if got, want := hostPaths(ds.Spec.Template.Spec), deploytest.DefaultExporterHostPaths("/var/lib/kubelet").List(); !slices.Equal(got, want) {
				t.Errorf("hostPaths %v, want %v", got, want)
			}
			wantArgs(t, "exporter", ds.Spec.Template.Spec.Containers[0].Args, "--collection.ephemeral-storage",
				"--kubelet.pod-logs-dir=/var/log/pods", "--containerd.task-dir=/run/containerd/io.containerd.runtime.v2.task",
				"--containerd.snapshotter-root=/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs",
				"--containerd.cri-containers-dir=/var/lib/containerd/io.containerd.grpc.v1.cri/containers")
			if tol := ds.Spec.Template.Spec.Tolerations; len(tol) != 1 || tol[0].Operator != corev1.TolerationOpExists || tol[0].Key != "" {
				t.Errorf("exporter tolerations %v, want every taint", tol)
			}
			if img := defaultImage(t); ds.Labels["app.kubernetes.io/managed-by"] != "Helm" || ds.Spec.Template.Spec.Containers[0].Image != img {
				t.Errorf("labels %v, image %s, want %s", ds.Labels, ds.Spec.Template.Spec.Containers[0].Image, img)
			}
			if c := ds.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities; !slices.Equal(c.Add, []corev1.Capability{"DAC_READ_SEARCH"}) {
				t.Errorf("exporter capabilities %v", c)
			}
			if r.allowedAnywhere("emptydir-exporter", deploytest.Perm("", "", "nodes/stats", "get")) || r.allowedAnywhere("emptydir-remediator", deploytest.Perm("", "", "nodes/proxy", "get")) {
				t.Error("the kubelet rights are granted without the kubelet source")
			}
			// NOTES.txt says how to check it and where Alertmanager posts, with the real names.
			for _, want := range []string{"rollout status daemonset/emptydir-exporter", "rollout status deployment/emptydir-remediator",
				"get lease emptydir-remediator", "url: http://emptydir-remediator.guard.svc:9732/webhook", "get secret emptydir-remediator-webhook",
				"timeout: 50s"} {
				if !strings.Contains(r.files["templates/NOTES.txt"], want) {
					t.Errorf("NOTES.txt lacks %q:\n%s", want, r.files["templates/NOTES.txt"])
				}
			}
		},
	}, {
		name: "another release name prefixes every name", release: release("guard"),
		exp: "guard-emptydir-exporter", rem: "guard-emptydir-remediator",
		check: func(t *testing.T, r rendered) {
			d := deploytest.RemediatorDeployment(t, r.objs, "guard-emptydir-remediator")
			wantArgs(t, "remediator", d.Spec.Template.Spec.Containers[0].Args,
				"--leader-elect.lease-name=guard-emptydir-remediator", "--exporter.selector=app.kubernetes.io/name=emptydir-exporter,app.kubernetes.io/instance=guard")
		},
	}, {
		name: "kube-prometheus-stack", release: release("guard", "kube-prometheus-stack-values.yaml"),
		exp: "guard-emptydir-exporter", rem: "guard-emptydir-remediator",
		check: func(t *testing.T, r rendered) {
			d := deploytest.RemediatorDeployment(t, r.objs, "guard-emptydir-remediator")
			wantArgs(t, "remediator", d.Spec.Template.Spec.Containers[0].Args, "--eviction.dry-run",
				"--policy.namespace-deny=kube-system", "--policy.namespace-deny=monitoring", "--eviction.max-per-node=2", "--eviction.cooldown=15m")
			var monitors, rules, amConfigs int
			dashboards := map[string]string{}
			for _, o := range r.objs {
				switch v := o.(type) {
				case *unstructured.Unstructured:
					// Its Alertmanager selects every AlertmanagerConfig; its Prometheus only
					// the monitors and rules labelled release=<its release>.
					if v.GetKind() != "AlertmanagerConfig" && v.GetLabels()["release"] != "kube-prometheus-stack" {
						t.Errorf("%s %s lacks the operator's selector label", v.GetKind(), v.GetName())
					}
					switch v.GetKind() {
					case "PodMonitor":
						monitors++
					case "AlertmanagerConfig":
						amConfigs++
					case "PrometheusRule":
						rules++
						spec, route := withoutRoutingCopy(t, v.Object["spec"])
						if !reflect.DeepEqual(spec, rulesWant(t)) {
							t.Error("the PrometheusRule's spec, but for EmptyDirRemediationRoute, differs from rules/prometheusrule.yaml")
						}
						checkRoutingCopy(t, route, "guard")
					}
				case *corev1.ConfigMap:
					if v.Labels["grafana_dashboard"] != "1" || v.Annotations["grafana_folder"] != "emptyDir guard" {
						t.Errorf("ConfigMap %s: labels %v annotations %v", v.Name, v.Labels, v.Annotations)
					}
					for k, data := range v.Data {
						dashboards[k] = data
					}
				}
			}
			if monitors != 2 || rules != 1 || amConfigs != 1 {
				t.Errorf("%d PodMonitors, %d PrometheusRules, %d AlertmanagerConfigs", monitors, rules, amConfigs)
			}
			src, _ := filepath.Glob(filepath.Join(root, "dashboards/*.json"))
			if len(src) == 0 || len(dashboards) != len(src) {
				t.Errorf("%d dashboard ConfigMap entries for %d dashboards", len(dashboards), len(src))
			}
			for _, f := range src {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if got := dashboards[filepath.Base(f)]; strings.TrimSpace(got) != strings.TrimSpace(string(b)) {
					t.Errorf("dashboard %s: the ConfigMap does not hold dashboards/%s", filepath.Base(f), filepath.Base(f))
				}
			}
		},
	}, {
		name: "kubelet source", release: release("guard", "kubelet-source-values.yaml"),
		exp: "guard-emptydir-exporter", rem: "guard-emptydir-remediator",
		check: func(t *testing.T, r rendered) {
			ds := deploytest.ExporterDaemonSet(t, r.objs, "guard-emptydir-exporter")
			c := ds.Spec.Template.Spec.Containers[0]
			wantArgs(t, "exporter", c.Args, "--collection.source=kubelet", "--kubelet.url=https://$(NODE_IP):10250", "--collection.interval=30s")
			// No mount but the remediator's token (TestNoticesRender).
			if hp := hostPaths(ds.Spec.Template.Spec); len(hp) != 0 || len(c.VolumeMounts) != 1 || c.VolumeMounts[0].Name != "remediator-token" {
				t.Errorf("kubelet source: hostPaths %v, mounts %v", hp, c.VolumeMounts)
			}
			// Ephemeral storage is the filesystem source's: no flag of it either.
			for _, f := range []string{"collection.ephemeral-storage", "no-collection.ephemeral-storage", "kubelet.pod-logs-dir", "containerd.task-dir", "containerd.snapshotter-root"} {
				if v := deploytest.ArgValues(c.Args, f); len(v) != 0 {
					t.Errorf("kubelet source: --%s %v", f, v)
				}
			}
			if !r.allowed("guard-emptydir-exporter", deploytest.Perm("", "", "nodes/stats", "get")) || r.allowedAnywhere("guard-emptydir-exporter", deploytest.Perm("", "", "nodes/proxy", "get")) {
				t.Error("kubelet source: want get nodes/stats and not nodes/proxy")
			}
			if find[*unstructured.Unstructured](r, "guard-emptydir-exporter") == nil {
				t.Error("no ServiceMonitor for the exporter")
			}
		},
	}, {
		name: "hardened", release: release("guard", "hardened-values.yaml"),
		exp: "guard-emptydir-exporter", rem: "guard-emptydir-remediator",
		check: func(t *testing.T, r rendered) {
			if s := find[*corev1.Secret](r, "guard-emptydir-remediator-webhook"); s != nil {
				t.Error("a token Secret is generated although webhookToken.existingSecret is set")
			}
			for name, spec := range deploytest.PodSpecs(r.objs) {
				c := spec.Containers[0]
				if c.Image != "registry.example/emptydir-guard:v0.1.0" || len(spec.ImagePullSecrets) != 1 {
					t.Errorf("%s: image %s, pull secrets %v", name, c.Image, spec.ImagePullSecrets)
				}
				for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
					if p.HTTPGet == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
						t.Errorf("%s: probe %+v, want HTTPS with tls_server_config", name, p.ProbeHandler)
					}
				}
				files := deploytest.ArgValues(c.Args, "web.config.file")
				if len(files) != 1 {
					t.Errorf("%s: --web.config.file %v", name, files)
					continue
				}
				mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return filepath.Dir(files[0]) == m.MountPath })
				if !mounted {
					t.Errorf("%s: nothing mounted at %s", name, filepath.Dir(files[0]))
				}
			}
			for _, n := range []string{"guard-emptydir-exporter-web-config", "guard-emptydir-remediator-web-config"} {
				s := find[*corev1.Secret](r, n)
				if s == nil || !strings.Contains(s.StringData["web-config.yml"], "cert_file:") {
					t.Errorf("web config Secret %s: %v", n, s)
				}
			}
			ds := deploytest.ExporterDaemonSet(t, r.objs, "guard-emptydir-exporter")
			if got, want := hostPaths(ds.Spec.Template.Spec), []string{"/var/lib/k0s/kubelet/pods", "/var/log/pods",
				"/run/k0s/containerd/io.containerd.runtime.v2.task", "/var/lib/k0s/containerd/io.containerd.snapshotter.v1.overlayfs",
				"/var/lib/k0s/containerd/io.containerd.grpc.v1.cri/containers", "/sys/fs/cgroup"}; !slices.Equal(got, want) {
				t.Errorf("hostPaths %v, want %v", got, want)
			}
			wantArgs(t, "exporter", ds.Spec.Template.Spec.Containers[0].Args, "--kubelet.root-dir=/var/lib/kubelet", "--collection.interval=10s", "--log.format=json")
			d := deploytest.RemediatorDeployment(t, r.objs, "guard-emptydir-remediator")
			wantArgs(t, "remediator", d.Spec.Template.Spec.Containers[0].Args, "--policy.namespace-allow=batch", "--policy.namespace-allow=ci",
				"--policy.pod-selector=emptydir-guard/evict!=false", "--eviction.threshold-ratio=1.1", "--eviction.max-global=10", "--eviction.cap-window=30m",
				"--policy.allow-daemonset-pods", "--log.level=debug", "--exporter.scheme=https")
			if *d.Spec.Replicas != 3 || d.Spec.Template.Spec.PriorityClassName != "system-cluster-critical" {
				t.Errorf("replicas %d, priorityClassName %q", *d.Spec.Replicas, d.Spec.Template.Spec.PriorityClassName)
			}
			if _, b := limitPolicy(t, r); b == nil || !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{"Deny", "Audit"}) ||
				b.Spec.MatchResources.NamespaceSelector.MatchLabels["team-namespace"] != "true" {
				t.Errorf("limit policy binding %+v, want Deny and Audit in the namespaces labelled team-namespace", b)
			}
			for _, o := range r.objs {
				if o.(metav1.Object).GetLabels()["team"] != "platform" {
					t.Errorf("%T %s lacks commonLabels", o, o.(metav1.Object).GetName())
				}
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, tc.release)
			checkWiring(t, r, tc.release.Namespace, tc.exp, tc.rem)
			tc.check(t, r)
		})
	}
}

// TestToggles: each component, each optional object and the kubelet rights come and go with
// their values.
func TestToggles(t *testing.T) {
	with := func(v string) helmchart.Release {
		r := release("guard")
		if err := yaml.Unmarshal([]byte(v), &r.Values); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		values  string
		present []string
		absent  []string
	}{
		{"exporter: {enabled: false}", []string{"Deployment/guard-emptydir-remediator"},
			[]string{"DaemonSet/guard-emptydir-exporter", "ServiceAccount/guard-emptydir-exporter", "ClusterRole/guard-emptydir-exporter", "Service/guard-emptydir-exporter"}},
		{"remediator: {enabled: false}", []string{"DaemonSet/guard-emptydir-exporter"},
			[]string{"Deployment/guard-emptydir-remediator", "Secret/guard-emptydir-remediator-webhook", "Role/guard-emptydir-remediator", "PodDisruptionBudget/guard-emptydir-remediator"}},
		{"{remediator: {podDisruptionBudget: {enabled: false}}, exporter: {service: {enabled: false}}}", nil,
			[]string{"PodDisruptionBudget/guard-emptydir-remediator", "Service/guard-emptydir-exporter"}},
		{"{remediator: {serviceAccount: {create: false, name: byo}}}", nil, []string{"ServiceAccount/guard-emptydir-remediator"}},
		{"{}", []string{"NetworkPolicy/guard-emptydir-exporter", "NetworkPolicy/guard-emptydir-remediator"}, []string{"AlertmanagerConfig/guard-emptydir-remediator"}},
		{"alertmanagerConfig: {enabled: true, matcherStrategy: None}", []string{"AlertmanagerConfig/guard-emptydir-remediator"}, nil},
		{"{alertmanagerConfig: {enabled: true}, prometheusRule: {enabled: true}}", []string{"AlertmanagerConfig/guard-emptydir-remediator", "PrometheusRule/guard-emptydir-guard"}, nil},
		{"{alertmanagerConfig: {enabled: true}, remediator: {enabled: false}}", nil, []string{"AlertmanagerConfig/guard-emptydir-remediator"}},
		{"networkPolicy: {enabled: false}", nil, []string{"NetworkPolicy/guard-emptydir-exporter", "NetworkPolicy/guard-emptydir-remediator"}},
		{"{serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}, dashboards: {enabled: true}}",
			[]string{"ServiceMonitor/guard-emptydir-exporter", "ServiceMonitor/guard-emptydir-remediator", "PrometheusRule/guard-emptydir-guard", "ConfigMap/guard-emptydir-fleet"},
			[]string{"PodMonitor/guard-emptydir-exporter"}},
	} {
		t.Run(tc.values, func(t *testing.T) {
			got := deploytest.KindNames(render(t, with(tc.values)).objs)
			for _, p := range tc.present {
				if !slices.Contains(got, p) {
					t.Errorf("%s missing from %v", p, got)
				}
			}
			for _, a := range tc.absent {
				if slices.Contains(got, a) {
					t.Errorf("%s rendered", a)
				}
			}
		})
	}
	// The remediator's kubelet measurement is the only way it gets nodes/proxy.
	r := render(t, with("remediator: {measurementSource: kubelet}"))
	if !r.allowed("guard-emptydir-remediator", deploytest.Perm("", "", "nodes/proxy", "get")) {
		t.Error("measurementSource kubelet: no get nodes/proxy")
	}
	wantArgs(t, "remediator", deploytest.RemediatorDeployment(t, r.objs, "guard-emptydir-remediator").Spec.Template.Spec.Containers[0].Args, "--measurement.source=kubelet")
	// Basic auth answers the kubelet's HTTP probes with 401: the probes check the port instead.
	r = render(t, with("remediator: {webConfig: {basic_auth_users: {prometheus: $2y$10$abc}}}"))
	if p := deploytest.RemediatorDeployment(t, r.objs, "guard-emptydir-remediator").Spec.Template.Spec.Containers[0].ReadinessProbe; p.TCPSocket == nil {
		t.Errorf("basic auth: readiness probe %+v, want tcpSocket", p.ProbeHandler)
	}
}

// mountAt is the exporter container's mount at path and the volume it mounts; nils when
// nothing is mounted there.
func mountAt(spec corev1.PodSpec, path string) (*corev1.VolumeMount, *corev1.Volume) {
	for _, m := range spec.Containers[0].VolumeMounts {
		if m.MountPath != path {
			continue
		}
		for i := range spec.Volumes {
			if spec.Volumes[i].Name == m.Name {
				return &m, &spec.Volumes[i]
			}
		}
		return &m, nil
	}
	return nil, nil
}

// TestEphemeralStorage: exporter.ephemeralStorage renders --collection.ephemeral-storage and
// exactly the read-only hostPaths it reads, each mounted where its flag says and at the node's
// own path (the mount table's upperdirs are the node's paths); off, the negated flag and none
// of them; without containerd, no containerd directory; the native snapshotter's directory only when
// asked for; the CRI plugin's container directory (image VOLUMEs) unless turned off, when the flag
// is passed empty. The kubelet source gets none of it.
func TestEphemeralStorage(t *testing.T) {
	const (
		pods  = "/var/lib/kubelet/pods"
		tasks = "/run/containerd/io.containerd.runtime.v2.task"
		snaps = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"
		cri   = "/var/lib/containerd/io.containerd.grpc.v1.cri/containers"
	)
	none, empty := []string(nil), []string{""} // --containerd.cri-containers-dir absent, passed empty
	for _, tc := range []struct {
		values     string
		on         bool     // --collection.ephemeral-storage
		logs       string   // --kubelet.pod-logs-dir, mounted
		tasks      string   // --containerd.task-dir
		snaps      string   // --containerd.snapshotter-root
		containerd bool     // the containerd directories are mounted
		native     string   // --containerd.native-snapshotter-root, mounted
		cri        []string // --containerd.cri-containers-dir's values, mounted when a path
	}{
		{"{}", true, "/var/log/pods", tasks, snaps, true, "", []string{cri}},
		{"exporter: {ephemeralStorage: {enabled: false}}", false, "", "", "", false, "", none},
		{"exporter: {ephemeralStorage: {containerd: {enabled: false}}}", true, "/var/log/pods", tasks, snaps, false, "", empty},
		{"exporter: {ephemeralStorage: {podLogsDir: /srv/logs/pods/, containerd: {stateDir: /run/k3s/containerd/, root: /var/lib/rancher/k3s/agent/containerd}}}",
			true, "/srv/logs/pods", "/run/k3s/containerd/io.containerd.runtime.v2.task", "/var/lib/rancher/k3s/agent/containerd/io.containerd.snapshotter.v1.overlayfs", true, "",
			[]string{"/var/lib/rancher/k3s/agent/containerd/io.containerd.grpc.v1.cri/containers"}},
		{"exporter: {ephemeralStorage: {enabled: false, podLogsDir: /srv/logs/pods, containerd: {stateDir: /run/k3s/containerd}}}", false, "", "", "", false, "", none},
		{"exporter: {ephemeralStorage: {containerd: {nativeSnapshotter: true, root: /var/lib/containerd/}}}", true, "/var/log/pods", tasks, snaps, true,
			"/var/lib/containerd/io.containerd.snapshotter.v1.native", []string{cri}},
		{"exporter: {ephemeralStorage: {containerd: {enabled: false, nativeSnapshotter: true}}}", true, "/var/log/pods", tasks, snaps, false, "", empty},
		{"exporter: {ephemeralStorage: {containerd: {imageVolumes: false}}}", true, "/var/log/pods", tasks, snaps, true, "", empty},
		{"exporter: {ephemeralStorage: {containerd: {enabled: false, imageVolumes: true}}}", true, "/var/log/pods", tasks, snaps, false, "", empty},
	} {
		t.Run(tc.values, func(t *testing.T) {
			r := release("guard")
			if err := yaml.Unmarshal([]byte(tc.values), &r.Values); err != nil {
				t.Fatal(err)
			}
			spec := deploytest.ExporterDaemonSet(t, render(t, r).objs, "guard-emptydir-exporter").Spec.Template.Spec
			args := spec.Containers[0].Args
			on, off := deploytest.ArgValues(args, "collection.ephemeral-storage"), deploytest.ArgValues(args, "no-collection.ephemeral-storage")
			if tc.on && (len(on) != 1 || len(off) != 0) || !tc.on && (len(on) != 0 || len(off) != 1) {
				t.Errorf("--collection.ephemeral-storage %v, --no-collection.ephemeral-storage %v; want it on: %v", on, off, tc.on)
			}
			for flag, want := range map[string]string{"kubelet.pod-logs-dir": tc.logs, "containerd.task-dir": tc.tasks, "containerd.snapshotter-root": tc.snaps,
				"containerd.native-snapshotter-root": tc.native} {
				got := deploytest.ArgValues(args, flag)
				if want == "" && len(got) != 0 || want != "" && !slices.Equal(got, []string{want}) {
					t.Errorf("--%s %v, want %q", flag, got, want)
				}
			}
			if got := deploytest.ArgValues(args, "containerd.cri-containers-dir"); !slices.Equal(got, tc.cri) {
				t.Errorf("--containerd.cri-containers-dir %q, want %q", got, tc.cri)
			}
			criMounted := len(tc.cri) == 1 && tc.cri[0] != ""
			// Exactly these hostPaths, in this order.
			want := []string{pods}
			if tc.logs != "" {
				want = append(want, tc.logs)
			}
			if tc.containerd {
				want = append(want, tc.tasks, tc.snaps)
			}
			if tc.native != "" {
				want = append(want, tc.native)
			}
			if criMounted {
				want = append(want, tc.cri[0])
			}
			want = append(want, "/sys/fs/cgroup") // the change signal's, on by default (TestChangeSignal)
			if got := hostPaths(spec); !slices.Equal(got, want) {
				t.Errorf("hostPaths %v, want %v", got, want)
			}
			// Besides the hostPaths, the exporter's own emptyDir (TestCalibrationRender) and the
			// remediator's token (TestNoticesRender).
			if got := len(spec.Containers[0].VolumeMounts); got != len(want)+2 {
				t.Errorf("%d mounts, want %d: %+v", got, len(want)+2, spec.Containers[0].VolumeMounts)
			}
			type wantMount struct {
				path        string
				propagation corev1.MountPropagationMode // "": none
			}
			var mounts []wantMount
			if tc.logs != "" {
				mounts = append(mounts, wantMount{tc.logs, ""})
			}
			if tc.containerd {
				// New root filesystems must appear in the mount table: HostToContainer.
				mounts = append(mounts, wantMount{tc.tasks, corev1.MountPropagationHostToContainer}, wantMount{tc.snaps, ""})
				if tc.native != "" {
					mounts = append(mounts, wantMount{tc.native, ""})
				}
				if criMounted {
					mounts = append(mounts, wantMount{tc.cri[0], ""})
				}
			} else if tc.tasks != "" {
				// The flags point at directories that are not there: no layer is located.
				for _, p := range []string{tc.tasks, tc.snaps} {
					if m, _ := mountAt(spec, p); m != nil {
						t.Errorf("containerd off, yet %s is mounted", p)
					}
				}
			}
			for _, w := range mounts {
				m, v := mountAt(spec, w.path)
				if m == nil || v == nil || v.HostPath == nil {
					t.Errorf("%s: mount %+v of volume %+v, want a hostPath", w.path, m, v)
					continue
				}
				if v.HostPath.Path != w.path {
					t.Errorf("%s: mounts the node's %s, want the same path", w.path, v.HostPath.Path)
				}
				// A node without the directory (no containerd: CRI-O) must still run the exporter.
				if v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate {
					t.Errorf("%s: hostPath type %v, want DirectoryOrCreate", w.path, v.HostPath.Type)
				}
				var prop corev1.MountPropagationMode
				if m.MountPropagation != nil {
					prop = *m.MountPropagation
				}
				if !m.ReadOnly || prop != w.propagation || m.SubPath != "" || m.SubPathExpr != "" {
					t.Errorf("%s: readOnly %v, propagation %q, subPath %q%q; want read-only, propagation %q", w.path, m.ReadOnly, prop, m.SubPath, m.SubPathExpr, w.propagation)
				}
			}
		})
	}
	// The kubelet source reads no file: none of this, whatever the values say.
	r := release("guard")
	if err := yaml.Unmarshal([]byte("exporter: {source: kubelet, ephemeralStorage: {enabled: true}}"), &r.Values); err != nil {
		t.Fatal(err)
	}
	spec := deploytest.ExporterDaemonSet(t, render(t, r).objs, "guard-emptydir-exporter").Spec.Template.Spec
	if hp := hostPaths(spec); len(hp) != 0 {
		t.Errorf("kubelet source: hostPaths %v", hp)
	}
	for _, a := range spec.Containers[0].Args {
		if strings.Contains(a, "ephemeral-storage") || strings.Contains(a, "containerd.") || strings.Contains(a, "pod-logs-dir") {
			t.Errorf("kubelet source: %s", a)
		}
	}
}

// TestRuntimeLayerMounts: exporter.ephemeralStorage.crio and .docker, off by default, pass
// --crio.storage-root and --docker.root and mount exactly the runtime's records and layers, each
// read-only at the node's own path below the root the flag names; with ephemeral storage off or
// the kubelet source, neither.
func TestRuntimeLayerMounts(t *testing.T) {
	crioMounts := func(root string) []string {
		return []string{root + "/overlay-containers", root + "/overlay-layers", root + "/overlay"}
	}
	dockerMounts := func(root string) []string {
		return []string{root + "/image/overlay2/layerdb/mounts", root + "/overlay2"}
	}
	for _, tc := range []struct {
		values       string
		crio, docker string   // the flags' values; "": not passed
		mounts       []string // the runtime's hostPaths, in order
	}{
		{values: "{}"},
		{values: "exporter: {ephemeralStorage: {crio: {enabled: true}, containerd: {enabled: false}}}",
			crio: "/var/lib/containers/storage", mounts: crioMounts("/var/lib/containers/storage")},
		{values: "exporter: {ephemeralStorage: {crio: {enabled: true, storageRoot: /srv/storage/}}}",
			crio: "/srv/storage", mounts: crioMounts("/srv/storage")},
		{values: "exporter: {ephemeralStorage: {docker: {enabled: true}, containerd: {enabled: false}}}",
			docker: "/var/lib/docker", mounts: dockerMounts("/var/lib/docker")},
		{values: "exporter: {ephemeralStorage: {crio: {enabled: true}, docker: {enabled: true, root: /data/docker}}}",
			crio: "/var/lib/containers/storage", docker: "/data/docker", mounts: append(crioMounts("/var/lib/containers/storage"), dockerMounts("/data/docker")...)},
		{values: "exporter: {ephemeralStorage: {enabled: false, crio: {enabled: true}, docker: {enabled: true}}}"},
		{values: "exporter: {source: kubelet, ephemeralStorage: {crio: {enabled: true}, docker: {enabled: true}}}"},
	} {
		t.Run(tc.values, func(t *testing.T) {
			r := release("guard")
			if err := yaml.Unmarshal([]byte(tc.values), &r.Values); err != nil {
				t.Fatal(err)
			}
			spec := deploytest.ExporterDaemonSet(t, render(t, r).objs, "guard-emptydir-exporter").Spec.Template.Spec
			args := spec.Containers[0].Args
			for flag, want := range map[string]string{"crio.storage-root": tc.crio, "docker.root": tc.docker} {
				got := deploytest.ArgValues(args, flag)
				if want == "" && len(got) != 0 || want != "" && !slices.Equal(got, []string{want}) {
					t.Errorf("--%s %v, want %q", flag, got, want)
				}
			}
			var got []string
			for _, p := range hostPaths(spec) {
				if strings.Contains(p, "/overlay") {
					got = append(got, p)
				}
			}
			if !slices.Equal(got, tc.mounts) {
				t.Errorf("the runtime's hostPaths %v, want %v", got, tc.mounts)
			}
			for _, p := range tc.mounts {
				m, v := mountAt(spec, p)
				if m == nil || v == nil || v.HostPath == nil || v.HostPath.Path != p {
					t.Errorf("%s: mount %+v of volume %+v, want the node's own path", p, m, v)
					continue
				}
				if !m.ReadOnly || m.MountPropagation != nil || m.SubPath != "" {
					t.Errorf("%s: readOnly %v, propagation %v, subPath %q; want read-only, none, none", p, m.ReadOnly, m.MountPropagation, m.SubPath)
				}
				if v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate {
					t.Errorf("%s: hostPath type %v, want DirectoryOrCreate", p, v.HostPath.Type)
				}
			}
		})
	}
}

// exporter.ephemeralStorage.kubeletFallback passes the kubelet's settings to the filesystem
// source, for the writable layers it cannot locate, with the right to read its stats; off (the
// default) neither, so the filesystem source never holds nodes/stats it does not use.
func TestEphemeralStorageKubeletFallback(t *testing.T) {
	for _, tc := range []struct {
		values string
		want   []string // the kubelet's flags
		right  string   // the kubelet right the exporter holds; "" none
	}{
		{"{}", nil, ""},
		{"exporter: {ephemeralStorage: {kubeletFallback: true}}",
			[]string{"--kubelet.url=https://$(NODE_IP):10250", "--kubelet.ca-file=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", "--kubelet.token-file=/var/run/secrets/kubernetes.io/serviceaccount/token"}, "nodes/stats"},
		{"exporter: {ephemeralStorage: {kubeletFallback: true}, kubelet: {viaAPIServer: true}}",
			[]string{"--kubelet.via-apiserver", "--kubelet.ca-file=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", "--kubelet.token-file=/var/run/secrets/kubernetes.io/serviceaccount/token"}, "nodes/proxy"},
		{"exporter: {ephemeralStorage: {enabled: false, kubeletFallback: true}}", nil, ""},
	} {
		t.Run(tc.values, func(t *testing.T) {
			rel := release("guard")
			if err := yaml.Unmarshal([]byte(tc.values), &rel.Values); err != nil {
				t.Fatal(err)
			}
			r := render(t, rel)
			args := deploytest.ExporterDaemonSet(t, r.objs, "guard-emptydir-exporter").Spec.Template.Spec.Containers[0].Args
			var got []string
			for _, a := range args {
				if strings.HasPrefix(a, "--kubelet.") && !strings.HasPrefix(a, "--kubelet.root-dir") && !strings.HasPrefix(a, "--kubelet.pod-logs-dir") {
					got = append(got, a)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("kubelet flags %v, want %v", got, tc.want)
			}
			for _, res := range []string{"nodes/stats", "nodes/proxy"} {
				if held := r.allowedAnywhere("guard-emptydir-exporter", deploytest.Perm("", "", res, "get")); held != (res == tc.right) {
					t.Errorf("get %s held: %v, want %v", res, held, res == tc.right)
				}
			}
		})
	}
}

// ---- the rendered arguments parse in the real commands ----

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func commandBinary(t *testing.T, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "emptydir-guard-helm-test-"); buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-trimpath", "-o", binDir+"/", "./cmd/...")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{err, out}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, name)
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string {
	return "go build ./cmd/...: " + e.err.Error() + "\n" + string(e.out)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// TestRenderedArgsParse: every argument the chart renders, with every tuning flag set, is one
// the commands accept (kingpin rejects unknown flags and bad values before --version exits 0).
func TestRenderedArgsParse(t *testing.T) {
	all := release("guard")
	if err := yaml.Unmarshal([]byte(`
exporter:
  metricDenylist: [go_.*, 'process_(cpu|open)_.*']
  namespaces: [shop, web]
  namespacesDenylist: [kube-system]
  flags: {collection.concurrency: 2, collection.volume-timeout: 2m, collection.unlimited-interval: 2m, collection.cpu-budget: 0.1, live.max-wait: 5s, fs.walk-concurrency: 4, live.concurrency: 2, kubelet.timeout: 10s, log.level: debug, log.format: json}
remediator:
  dryRun: true
  namespaceAllow: [a, b]
  podSelector: app=x
  flags: {eviction.threshold-ratio: 0.9, eviction.cooldown: 10m, eviction.max-per-node: 1, eviction.max-per-namespace: 2, eviction.max-global: 3,
    eviction.cap-window: 1h, eviction.grace-period: 30, measurement.max-age: 1m, measurement.timeout: 3s, web.alert-timeout: 20s,
    policy.opt-out-annotation: example.com/no-evict, policy.allow-daemonset-pods: true, policy.allow-critical-pods: false, policy.allow-mirror-pods: true,
    log.level: warn, log.format: logfmt}
`), &all.Values); err != nil {
		t.Fatal(err)
	}
	// The negated boolean and the flags without their directories parse too.
	noEphemeral, noContainerd := release("guard"), release("guard")
	noEphemeral.Values = map[string]any{"exporter": map[string]any{"ephemeralStorage": map[string]any{"enabled": false}}}
	noContainerd.Values = map[string]any{"exporter": map[string]any{"ephemeralStorage": map[string]any{"containerd": map[string]any{"enabled": false}}}}
	releases := map[string]helmchart.Release{"every flag": all, "base": helmchart.BaseRelease(root, nil),
		"ephemeral storage off": noEphemeral, "containerd off": noContainerd}
	files, _ := filepath.Glob(valuesFile("*-values.yaml"))
	for _, f := range files {
		releases[filepath.Base(f)] = release("guard", filepath.Base(f))
	}
	for name, rel := range releases {
		t.Run(name, func(t *testing.T) {
			for what, spec := range deploytest.PodSpecs(render(t, rel).objs) {
				c := spec.Containers[0]
				args := make([]string, 0, len(c.Args)+1)
				for _, a := range c.Args {
					args = append(args, strings.ReplaceAll(a, "$(NODE_IP)", "192.0.2.10"))
				}
				bin := commandBinary(t, filepath.Base(c.Command[0]))
				if out, err := exec.Command(bin, append(args, "--version")...).CombinedOutput(); err != nil {
					t.Errorf("%s: %s %v --version: %v\n%s", what, filepath.Base(bin), args, err, out)
				}
			}
		})
	}
	// The controls: a flag the command does not have, and a value after a boolean flag, fail.
	for _, bad := range []string{"--max-eviction=3", "--policy.allow-daemonset-pods=true"} {
		if out, err := exec.Command(commandBinary(t, "emptydir-remediator"), bad, "--version").CombinedOutput(); err == nil {
			t.Errorf("%s parsed: %s", bad, out)
		}
	}
}

// TestProjectQuota: exporter.projectQuota.enabled turns on --fs.project-quota and adds
// CAP_SYS_ADMIN, which reading another project's quota needs, beside DAC_READ_SEARCH; off (the
// default) renders --no-fs.project-quota and no SYS_ADMIN; the kubelet source gets neither.
func TestProjectQuota(t *testing.T) {
	for _, tc := range []struct {
		values  string
		flag    string // the rendered flag, "" for none
		wantCap []corev1.Capability
	}{
		{"{}", "no-fs.project-quota", []corev1.Capability{"DAC_READ_SEARCH"}},
		{"exporter: {projectQuota: {enabled: false}}", "no-fs.project-quota", []corev1.Capability{"DAC_READ_SEARCH"}},
		{"exporter: {projectQuota: {enabled: true}}", "fs.project-quota", []corev1.Capability{"DAC_READ_SEARCH", "SYS_ADMIN"}},
		{"exporter: {projectQuota: {enabled: true}, securityContext: {capabilities: {drop: [ALL], add: [SYS_ADMIN]}}}", "fs.project-quota", []corev1.Capability{"SYS_ADMIN"}},
		{"exporter: {source: kubelet, projectQuota: {enabled: true}}", "", nil},
	} {
		t.Run(tc.values, func(t *testing.T) {
			r := release("guard")
			if err := yaml.Unmarshal([]byte(tc.values), &r.Values); err != nil {
				t.Fatal(err)
			}
			c := deploytest.ExporterDaemonSet(t, render(t, r).objs, "guard-emptydir-exporter").Spec.Template.Spec.Containers[0]
			for _, flag := range []string{"fs.project-quota", "no-fs.project-quota"} {
				if got, want := len(deploytest.ArgValues(c.Args, flag)), btoi(flag == tc.flag); got != want {
					t.Errorf("--%s rendered %d times, want %d (args %v)", flag, got, want, c.Args)
				}
			}
			var caps []corev1.Capability
			if sc := c.SecurityContext; sc != nil && sc.Capabilities != nil {
				caps = sc.Capabilities.Add
			}
			if !slices.Equal(caps, tc.wantCap) {
				t.Errorf("capabilities added %v, want %v", caps, tc.wantCap)
			}
		})
	}
}

// TestListValues: exporter.metricAllowlist, metricDenylist, metricOptInList, namespaces and
// namespacesDenylist render one flag each, the entries joined by commas as the command splits them; none when
// empty (the default).
func TestListValues(t *testing.T) {
	for _, tc := range []struct {
		values                         string
		allow, deny, optIn, ns, denyNS []string
	}{
		{"{}", nil, nil, nil, nil, nil},
		{"exporter: {metricAllowlist: [emptydir_used_bytes, 'emptydir_.*_limit_bytes']}", []string{"emptydir_used_bytes,emptydir_.*_limit_bytes"}, nil, nil, nil, nil},
		{"exporter: {metricDenylist: ['go_.*', 'emptydir_inodes_used']}", nil, []string{"go_.*,emptydir_inodes_used"}, nil, nil, nil},
		{"exporter: {metricOptInList: [emptydir_inodes_used, 'emptydir_.*_part_bytes']}", nil, nil, []string{"emptydir_inodes_used,emptydir_.*_part_bytes"}, nil, nil},
		{"exporter: {namespaces: [shop, web], namespacesDenylist: [kube-system]}", nil, nil, nil, []string{"shop,web"}, []string{"kube-system"}},
	} {
		t.Run(tc.values, func(t *testing.T) {
			r := release("guard")
			if err := yaml.Unmarshal([]byte(tc.values), &r.Values); err != nil {
				t.Fatal(err)
			}
			c := deploytest.ExporterDaemonSet(t, render(t, r).objs, "guard-emptydir-exporter").Spec.Template.Spec.Containers[0]
			if got := deploytest.ArgValues(c.Args, "metric-allowlist"); !slices.Equal(got, tc.allow) {
				t.Errorf("--metric-allowlist %q, want %q", got, tc.allow)
			}
			if got := deploytest.ArgValues(c.Args, "metric-denylist"); !slices.Equal(got, tc.deny) {
				t.Errorf("--metric-denylist %q, want %q", got, tc.deny)
			}
			if got := deploytest.ArgValues(c.Args, "metric-opt-in-list"); !slices.Equal(got, tc.optIn) {
				t.Errorf("--metric-opt-in-list %q, want %q", got, tc.optIn)
			}
			if got := deploytest.ArgValues(c.Args, "namespaces"); !slices.Equal(got, tc.ns) {
				t.Errorf("--namespaces %q, want %q", got, tc.ns)
			}
			if got := deploytest.ArgValues(c.Args, "namespaces-denylist"); !slices.Equal(got, tc.denyNS) {
				t.Errorf("--namespaces-denylist %q, want %q", got, tc.denyNS)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestKubeletSourceEphemeralStorageOff: with the kubelet source the exporter measures the pods'
// ephemeral storage from the Summary API unless told not to (the command's default is on), so
// exporter.ephemeralStorage.enabled: false must say --no-collection.ephemeral-storage there too.
func TestKubeletSourceEphemeralStorageOff(t *testing.T) {
	for values, want := range map[string][]string{
		"exporter: {source: kubelet}":                                     nil,
		"exporter: {source: kubelet, ephemeralStorage: {enabled: false}}": {""},
	} {
		r := release("guard")
		if err := yaml.Unmarshal([]byte(values), &r.Values); err != nil {
			t.Fatal(err)
		}
		args := deploytest.ExporterDaemonSet(t, render(t, r).objs, "guard-emptydir-exporter").Spec.Template.Spec.Containers[0].Args
		if got := deploytest.ArgValues(args, "no-collection.ephemeral-storage"); !slices.Equal(got, want) {
			t.Errorf("%s: --no-collection.ephemeral-storage %q, want %q", values, got, want)
		}
	}
}

// TestOwnPodsHaveTheLimits: the chart's own pods carry the local-storage limits every pod
// should have, and limitPolicy asks for (TestLimitPolicyOnRealAPIServer applies them under it):
// an ephemeral-storage limit on every container (and no emptyDir without a sizeLimit), with a
// request of 0, which a kubelet without local storage capacity isolation admits.
func TestOwnPodsHaveTheLimits(t *testing.T) {
	for name, spec := range deploytest.PodSpecs(render(t, release("guard")).objs) {
		for _, v := range spec.Volumes {
			if v.EmptyDir != nil && v.EmptyDir.Medium == "" && (v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Sign() <= 0) {
				t.Errorf("%s: emptyDir %s without a sizeLimit", name, v.Name)
			}
		}
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			limit, ok := c.Resources.Limits["ephemeral-storage"]
			request, requested := c.Resources.Requests["ephemeral-storage"]
			if !ok || limit.Sign() <= 0 || !requested || !request.IsZero() {
				t.Errorf("%s/%s: ephemeral-storage limit %v (set %v), request %v; want a limit and a request of 0", name, c.Name, &limit, ok, &request)
			}
		}
	}
}

// TestChangeSignal: exporter.changeSignal (on by default) renders --collection.change-signal with
// the kubelet's cgroup root and driver, and the node's /sys/fs/cgroup mounted read-only where
// --cgroup.mount says; skipUnchanged adds --collection.change-signal.skip-unchanged,
// runtimeClasses --collection.change-signal.runtime-classes with their names; off, it
// renders --no-collection.change-signal (the exporter's default is on) and no mount; with the
// kubelet source, which walks nothing, neither.
func TestChangeSignal(t *testing.T) {
	with := func(v string) corev1.PodSpec {
		r := release("guard")
		if err := yaml.Unmarshal([]byte(v), &r.Values); err != nil {
			t.Fatal(err)
		}
		return deploytest.ExporterDaemonSet(t, render(t, r).objs, "guard-emptydir-exporter").Spec.Template.Spec
	}
	if args := with("{}").Containers[0].Args; !slices.Contains(args, "--collection.change-signal") ||
		slices.Contains(args, "--collection.change-signal.skip-unchanged") || len(deploytest.ArgValues(args, "collection.change-signal.runtime-classes")) > 0 {
		t.Errorf("defaults: exporter args %q, want the change signal on, unchanged parts walked last, the default runtime's pods only vouched for", args)
	}
	spec := with("exporter: {changeSignal: {cgroupRoot: /edg, cgroupDriver: systemd, skipUnchanged: true, runtimeClasses: [runc, crun]}}")
	args := spec.Containers[0].Args
	wantArgs(t, "exporter", args, "--collection.change-signal", "--collection.change-signal.skip-unchanged", "--collection.change-signal.runtime-classes=runc,crun",
		"--cgroup.root=/edg", "--cgroup.driver=systemd")
	mounts := deploytest.ArgValues(args, "cgroup.mount")
	if len(mounts) != 1 {
		t.Fatalf("exporter args %v: want one --cgroup.mount", args)
	}
	m, v := mountAt(spec, mounts[0])
	if m == nil || v == nil || v.HostPath == nil || v.HostPath.Path != "/sys/fs/cgroup" || !m.ReadOnly {
		t.Errorf("at --cgroup.mount=%s: mount %+v of volume %+v, want the node's /sys/fs/cgroup read-only", mounts[0], m, v)
	}
	for off, want := range map[string][]string{"exporter: {changeSignal: {enabled: false, skipUnchanged: true, runtimeClasses: [runc]}}": {"--no-collection.change-signal"},
		"exporter: {source: kubelet}": nil} {
		spec := with(off)
		var got []string
		for _, a := range spec.Containers[0].Args {
			if strings.Contains(a, "change-signal") || strings.HasPrefix(a, "--cgroup.") {
				got = append(got, a)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: exporter args %q, want %q", off, got, want)
		}
		if slices.Contains(hostPaths(spec), "/sys/fs/cgroup") {
			t.Errorf("%s: the node's cgroups are mounted", off)
		}
	}
}

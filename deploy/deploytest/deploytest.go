// Package deploytest holds the test helpers shared by the tests of the manifests: the
// kustomize base (deploy) and the Helm chart (test/helm).
package deploytest

import (
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/emptydir-guard/emptydir-guard/deploy"
)

// MustFind is the object of type T named name among objs; the test fails, naming the
// objects there are, when there is none.
func MustFind[T runtime.Object](t testing.TB, objs []runtime.Object, name string) T {
	t.Helper()
	v, ok := deploy.Find[T](objs, name)
	if !ok {
		var have []string
		for _, o := range objs {
			if acc, ok := o.(metav1.Object); ok {
				have = append(have, o.GetObjectKind().GroupVersionKind().Kind+"/"+acc.GetName())
			}
		}
		t.Fatalf("no %T %s in %v", v, name, have)
	}
	return v
}

// ExporterDaemonSet is the exporter's DaemonSet named name among objs (the base's is
// emptydir-exporter, a Helm release's <release>-emptydir-exporter); the test fails without it.
func ExporterDaemonSet(t testing.TB, objs []runtime.Object, name string) *appsv1.DaemonSet {
	t.Helper()
	return MustFind[*appsv1.DaemonSet](t, objs, name)
}

// RemediatorDeployment is the remediator's Deployment named name among objs; the test fails
// without it.
func RemediatorDeployment(t testing.TB, objs []runtime.Object, name string) *appsv1.Deployment {
	t.Helper()
	return MustFind[*appsv1.Deployment](t, objs, name)
}

// All is every object of type T among objs, in order.
func All[T runtime.Object](objs []runtime.Object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// PodSpecs are the pod templates of the DaemonSets and Deployments among objs, by
// "DaemonSet/<name>" or "Deployment/<name>".
func PodSpecs(objs []runtime.Object) map[string]corev1.PodSpec {
	out := map[string]corev1.PodSpec{}
	for _, o := range objs {
		switch v := o.(type) {
		case *appsv1.DaemonSet:
			out["DaemonSet/"+v.Name] = v.Spec.Template.Spec
		case *appsv1.Deployment:
			out["Deployment/"+v.Name] = v.Spec.Template.Spec
		}
	}
	return out
}

// KindNames lists objs as sorted "Kind/name" strings.
func KindNames(objs []runtime.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetObjectKind().GroupVersionKind().Kind+"/"+o.(metav1.Object).GetName())
	}
	slices.Sort(out)
	return out
}

// ArgValues are the values of every --flag=value in args, in order; a bare --flag (a
// boolean) gives "".
func ArgValues(args []string, flag string) []string {
	var out []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+flag+"="); ok {
			out = append(out, v)
		} else if a == "--"+flag {
			out = append(out, "")
		}
	}
	return out
}

// ArgValue is the first --flag=value of args; false when there is none.
func ArgValue(args []string, flag string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+flag+"="); ok {
			return v, true
		}
	}
	return "", false
}

// ExporterPrivileges is what the exporter pods may do beyond an unprivileged pod.
type ExporterPrivileges struct {
	HostPaths    []string            // hostPath volumes the container mounts, "path:ro" when read-only
	Capabilities []corev1.Capability // added to the container
	Root         bool                // runs as uid 0
	HostPID      bool                // shares the node's PID namespace
	Rights       []string            // "verb group/resource" of every rule bound to its ServiceAccount, sorted
}

// ExporterHostPaths are the node's directories the filesystem source mounts, each read-only: the
// kubelet's pods directory and, with --collection.ephemeral-storage, the kubelet's pod logs
// directory and containerd's runtime v2 task directory, overlayfs snapshotter root and CRI container
// directory (image VOLUMEs), and with the change signal (on unless --no-collection.change-signal)
// or --collection.open-files the node's cgroups. An empty field is a directory that must not be
// mounted.
type ExporterHostPaths struct {
	Pods                string // <kubelet-root>/pods
	PodLogs             string // the kubelet's podLogsDir; "" without --collection.ephemeral-storage
	ContainerdTasks     string // <containerd state>/io.containerd.runtime.v2.task; "" without containerd
	ContainerdSnapshots string // <containerd root>/io.containerd.snapshotter.v1.overlayfs; "" without containerd
	// ContainerdCRIContainers is <containerd root>/io.containerd.grpc.v1.cri/containers, the
	// directories of image VOLUMEs; "" without containerd or with imageVolumes off.
	ContainerdCRIContainers string
	// Runtime is CRI-O's and Docker's directories (their records of each container's layer, and
	// the layers), where chosen.
	Runtime []string
	Cgroups string // /sys/fs/cgroup; "" with --no-collection.change-signal (unless --collection.open-files)
}

// DefaultExporterHostPaths are the directories the chart's defaults (and the kustomize base)
// mount, with the kubelet pods directory <kubeletRoot>/pods.
func DefaultExporterHostPaths(kubeletRoot string) ExporterHostPaths {
	return ExporterHostPaths{
		Pods:                    strings.TrimSuffix(kubeletRoot, "/") + "/pods",
		PodLogs:                 "/var/log/pods",
		ContainerdTasks:         "/run/containerd/io.containerd.runtime.v2.task",
		ContainerdSnapshots:     "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs",
		ContainerdCRIContainers: "/var/lib/containerd/io.containerd.grpc.v1.cri/containers",
		Cgroups:                 "/sys/fs/cgroup",
	}
}

// List is the non-empty paths, in the order the chart mounts them.
func (h ExporterHostPaths) List() []string {
	var out []string
	paths := append([]string{h.Pods, h.PodLogs, h.ContainerdTasks, h.ContainerdSnapshots, h.ContainerdCRIContainers}, h.Runtime...)
	for _, p := range append(paths, h.Cgroups) {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// WantExporterPrivileges are exactly the privileges each --collection.source needs: the
// filesystem source walks <kubelet-root>/pods, and reads the pod logs and containerd directories
// of paths, all read-only, as root with DAC_READ_SEARCH, and with openFiles
// (--collection.open-files) the node's PID namespace and SYS_PTRACE besides; the kubelet source
// reads the Summary API (get nodes/stats, or nodes/proxy through the API server) and nothing
// of the node. Both list and watch their node's pods.
func WantExporterPrivileges(source string, viaAPIServer, openFiles bool, paths ExporterHostPaths) ExporterPrivileges {
	rights := []string{"list /pods", "watch /pods"}
	if source == "filesystem" {
		var hostPaths []string
		for _, p := range paths.List() {
			hostPaths = append(hostPaths, p+":ro")
		}
		caps := []corev1.Capability{"DAC_READ_SEARCH"}
		if openFiles {
			caps = append(caps, "SYS_PTRACE")
		}
		return ExporterPrivileges{HostPaths: hostPaths, Capabilities: caps, Root: true, HostPID: openFiles, Rights: rights}
	}
	if viaAPIServer {
		rights = append(rights, "get /nodes/proxy")
	} else {
		rights = append(rights, "get /nodes/stats")
	}
	sort.Strings(rights)
	return ExporterPrivileges{Rights: rights}
}

// ExporterPrivilegesOf reads the privileges of DaemonSet ds among objs (its pods' ServiceAccount
// bound by the RoleBindings and ClusterRoleBindings of objs).
func ExporterPrivilegesOf(t testing.TB, objs []runtime.Object, ds *appsv1.DaemonSet) ExporterPrivileges {
	t.Helper()
	spec := ds.Spec.Template.Spec
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 {
		t.Fatalf("DaemonSet %s: %d containers, %d init containers; want the exporter alone", ds.Name, len(spec.Containers), len(spec.InitContainers))
	}
	c := spec.Containers[0]
	var p ExporterPrivileges
	for _, v := range spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name {
				p.HostPaths = append(p.HostPaths, v.HostPath.Path+map[bool]string{true: ":ro", false: ":rw"}[m.ReadOnly])
			}
		}
	}
	var uid *int64
	if spec.SecurityContext != nil {
		uid = spec.SecurityContext.RunAsUser
	}
	if c.SecurityContext != nil {
		if c.SecurityContext.Capabilities != nil {
			p.Capabilities = c.SecurityContext.Capabilities.Add
			if !slices.Equal(c.SecurityContext.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("DaemonSet %s drops %v, want [ALL]", ds.Name, c.SecurityContext.Capabilities.Drop)
			}
		}
		if c.SecurityContext.RunAsUser != nil {
			uid = c.SecurityContext.RunAsUser
		}
		if c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			t.Errorf("DaemonSet %s is privileged", ds.Name)
		}
	}
	// No uid at all runs as the image's user; the Dockerfile's is 65532, but say it here.
	p.Root = uid == nil || *uid == 0
	p.HostPID = spec.HostPID
	if spec.HostNetwork || spec.HostIPC {
		t.Errorf("DaemonSet %s shares the node's network or IPC namespace", ds.Name)
	}

	sa := spec.ServiceAccountName
	rules := map[string][]rbacv1.PolicyRule{}
	for _, o := range objs {
		switch v := o.(type) {
		case *rbacv1.ClusterRole:
			rules["ClusterRole/"+v.Name] = v.Rules
		case *rbacv1.Role:
			rules["Role/"+v.Namespace+"/"+v.Name] = v.Rules
		}
	}
	seen := map[string]bool{}
	for _, o := range objs {
		var key string
		var subjects []rbacv1.Subject
		switch v := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			key, subjects = "ClusterRole/"+v.RoleRef.Name, v.Subjects
		case *rbacv1.RoleBinding:
			key, subjects = v.RoleRef.Kind+"/"+v.Namespace+"/"+v.RoleRef.Name, v.Subjects
			if v.RoleRef.Kind == "ClusterRole" {
				key = "ClusterRole/" + v.RoleRef.Name
			}
		default:
			continue
		}
		if !slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == ds.Namespace
		}) {
			continue
		}
		for _, r := range rules[key] {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						seen[v+" "+g+"/"+res] = true
					}
				}
			}
		}
	}
	p.Rights = slices.Sorted(maps.Keys(seen))
	return p
}

// CheckExporterPrivileges fails t unless DaemonSet name among objs has exactly the privileges
// its --collection.source (read from its arguments) needs, the hostPaths being paths (for the
// filesystem source).
func CheckExporterPrivileges(t testing.TB, what string, objs []runtime.Object, name string, paths ExporterHostPaths) {
	t.Helper()
	ds := MustFind[*appsv1.DaemonSet](t, objs, name)
	source, viaAPIServer, openFiles, signalOff := "filesystem", false, false, false
	for _, a := range ds.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--collection.source="); ok {
			source = v
		}
		viaAPIServer = viaAPIServer || a == "--kubelet.via-apiserver"
		openFiles = openFiles || a == "--collection.open-files"
		signalOff = signalOff || a == "--no-collection.change-signal"
	}
	if signalOff && !openFiles {
		paths.Cgroups = "" // the signal is on by default; open files read the cgroups too
	}
	got, want := ExporterPrivilegesOf(t, objs, ds), WantExporterPrivileges(source, viaAPIServer, openFiles, paths)
	// On OpenShift (a SecurityContextConstraints among objs, whose fields test/helm pins) the
	// exporter may use it, and that is its only further right.
	if slices.ContainsFunc(KindNames(objs), func(kn string) bool { return strings.HasPrefix(kn, "SecurityContextConstraints/") }) {
		want.Rights = append(want.Rights, "use security.openshift.io/securitycontextconstraints")
		sort.Strings(want.Rights)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: the exporter (source %s) has\n  %+v\nwant exactly\n  %+v", what, source, got, want)
	}
}

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/plugin"
	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// pluginUser is the user the plugin runs as (kubectl --as) for the RBAC checks: it may list
// pods in one namespace, and the chart's kubectlPlugin.rbac binds it the plugin's Role.
const pluginUser = "kubectl-plugin-user"

// kubectlPlugin runs `kubectl emptydir ARGS` as a user runs it: kubectl, the cluster's own
// version, finds kubectl-emptydir on PATH (the directory `make build` wrote it to) and runs it
// with the same KUBECONFIG. It returns the exit code, stdout and stderr.
func kubectlPlugin(ctx context.Context, t *testing.T, c *cluster.Cluster, args ...string) (int, string, string) {
	t.Helper()
	k8sBin := os.Getenv("K8S_BIN_DIR")
	if _, err := os.Stat(filepath.Join(k8sBin, "kubectl")); err != nil {
		t.Fatalf("no kubectl in K8S_BIN_DIR %q (test/k8sbin/build.sh kubectl; make test-cluster builds it): %v", k8sBin, err)
	}
	binDir := filepath.Dir(testbin.Path(t, "kubectl-emptydir"))
	cmd := c.Command(ctx, "kubectl", append([]string{"emptydir"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+binDir+":"+k8sBin+":"+os.Getenv("PATH"), "KUBECONFIG="+c.KubeconfigPath())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("kubectl emptydir %v: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

// pluginWriter is a busybox pod whose usage the test writes: emptyDir "data" (sizeLimit) at
// /data, and, with limit set, container "app" with that ephemeral-storage limit (request 0, so
// that a node without local storage isolation admits it too).
func pluginWriter(c *cluster.Cluster, ns, name, sizeLimit, limit string) *corev1.Pod {
	sl := resource.MustParse(sizeLimit)
	ctr := corev1.Container{Name: "app", Image: cluster.BusyboxImage, ImagePullPolicy: corev1.PullNever,
		Command:      []string{"sh", "-c", "exec sleep 2147483647"},
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}
	if limit != "" {
		ctr.Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(limit)}
		ctr.Resources.Requests = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("0")}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{NodeName: c.NodeName(), TerminationGracePeriodSeconds: ptr.To(int64(0)), Containers: []corev1.Container{ctr},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &sl}}}}}}
}

func pluginWrite(ctx context.Context, t *testing.T, c *cluster.Cluster, p *corev1.Pod, file string, mib int) {
	t.Helper()
	if _, stderr, err := c.ExecInPod(ctx, p.Namespace, p.Name, "app", "dd", "if=/dev/zero", "of="+file, "bs=1M",
		fmt.Sprint("count=", mib), "conv=fsync"); err != nil {
		t.Fatalf("writing %d MiB to %s in %s/%s: %v (%s)", mib, file, p.Namespace, p.Name, err, stderr)
	}
}

// TestKubectlPlugin installs the chart (with kubectlPlugin.rbac for one user), runs pods whose
// usage it writes, and runs `kubectl emptydir top` and `explain` through kubectl: the numbers
// against du and the bytes written, the order nearest to the limit first, -o json, the exit
// codes, that a user who may list pods in one namespace sees nothing of another, and
// kubectl's conventions (pluginConventions).
func TestKubectlPlugin(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 8*time.Minute)
	defer cancel()

	const guardNS = "kubectl-plugin-guard"
	// A wrong cgroup root, which the plugin's figures do not depend on (the change signal only
	// orders walks): the calibration names it and the right one.
	in, objs := chartInstall(t, c, "kplug", guardNS, "\n  changeSignal: {cgroupRoot: /edg-wrong, cgroupDriver: cgroupfs}", `
kubectlPlugin:
  rbac:
    enabled: true
    subjects: [{kind: User, name: `+pluginUser+`, apiGroup: rbac.authorization.k8s.io}]
`)
	installed := installObjects(ctx, t, c, in, objs, deployAPIEnv(t, c))
	ds, err := c.Client().AppsV1().DaemonSets(guardNS).Get(ctx, installed.exporter, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exp := deployPodFromTemplate(ctx, t, c, guardNS, installed.exporter+"-"+framework.RandSuffix(), ds.Spec.Template, daemonSetOwner(ds))
	exp = deployWaitReady(ctx, t, c, exp)
	checkLayout(ctx, t, c, exp, "cgroup.root own_pod_not_found "+c.CgroupRoot())

	// mine: a namespace the user may list pods in; theirs: one they may not.
	mine, theirs := framework.Namespace(ctx, t, c, "kplug-mine"), framework.Namespace(ctx, t, c, "kplug-theirs")
	writer := framework.RunPod(ctx, t, c, pluginWriter(c, mine, "writer", "32Mi", "64Mi"))
	other := framework.RunPod(ctx, t, c, pluginWriter(c, theirs, "other", "8Mi", ""))
	pluginWrite(ctx, t, c, writer, "/data/f", 12) // 37.5% of its sizeLimit
	pluginWrite(ctx, t, c, writer, "/fill", 6)    // its writable layer
	pluginWrite(ctx, t, c, other, "/data/f", 6)   // 75% of its sizeLimit
	writerData := framework.DuBytes(t, part.EmptyDirPath(c.KubeletRootDir(), string(writer.UID), "data"))
	otherData := framework.DuBytes(t, part.EmptyDirPath(c.KubeletRootDir(), string(other.UID), "data"))
	const mib = 1 << 20
	// A writable layer holds the file's blocks and its directory's; logs and the pod's other
	// files add a few KiB: within 256 KiB.
	const slack = 256 << 10

	guard := "--guard-namespace=" + guardNS
	rowsOf := func(list plugin.UsageList, nss ...string) []plugin.Usage {
		var out []plugin.Usage
		for _, u := range list.Items {
			for _, ns := range nss {
				if u.Namespace == ns {
					out = append(out, u)
				}
			}
		}
		return out
	}
	var list plugin.UsageList
	framework.Eventually(t, 60*time.Second, 2*time.Second, "kubectl emptydir top -A shows the bytes written", func() (bool, string) {
		code, stdout, stderr := kubectlPlugin(ctx, t, c, "top", "-A", "-o", "json", guard)
		if code != 0 {
			return false, fmt.Sprintf("exit %d: %s", code, stderr)
		}
		list = plugin.UsageList{}
		if err := json.Unmarshal([]byte(stdout), &list); err != nil {
			return false, err.Error()
		}
		rows := rowsOf(list, mine, theirs)
		var got []string
		for _, u := range rows {
			got = append(got, fmt.Sprintf("%s/%s %s %d", u.Namespace, u.Pod, u.Target(), u.UsedBytes))
		}
		if len(rows) != 4 {
			return false, fmt.Sprintf("rows %q, want 4", got)
		}
		// Nearest to the limit first: other's volume (75%), writer's volume (37.5%), writer's
		// pod (18 of 64 MiB), its container (6 of 64 MiB).
		ok := rows[0].Pod == "other" && rows[0].Target() == "emptyDir/data" && rows[0].UsedBytes == otherData &&
			rows[1].Pod == "writer" && rows[1].Target() == "emptyDir/data" && rows[1].UsedBytes == writerData &&
			rows[2].Target() == "pod" && rows[2].UsedBytes >= writerData+6*mib && rows[2].UsedBytes <= writerData+6*mib+slack &&
			rows[3].Target() == "container/app" && rows[3].UsedBytes >= 6*mib && rows[3].UsedBytes <= 6*mib+slack
		return ok, fmt.Sprintf("rows %q; du: writer's volume %d, other's %d", got, writerData, otherData)
	})
	for _, u := range rowsOf(list, mine, theirs) {
		t.Logf("top: %s/%s %s used %d limit %d (%.1f%%) age %v (bound %v) node %s", u.Namespace, u.Pod, u.Target(), u.UsedBytes,
			*u.LimitBytes, *u.Percent, ptr.Deref(u.MeasurementAgeSeconds, -1), u.MeasurementAgeIsBound, u.Node)
		if u.Node != c.NodeName() || u.LimitBytes == nil || u.MeasurementAgeSeconds == nil || *u.MeasurementAgeSeconds > 30 {
			t.Errorf("row %+v: want node %s, a limit and a measurement age under 30s", u, c.NodeName())
		}
	}

	// The table, in the namespace only: no NAMESPACE column, the writer's rows in order.
	code, stdout, stderr := kubectlPlugin(ctx, t, c, "top", "-n", mine, guard)
	t.Logf("kubectl emptydir top -n %s:\n%s", mine, stdout)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[0], "POD ") || !strings.Contains(lines[1], "emptyDir/data") ||
		!strings.Contains(lines[1], "37%") || !strings.Contains(lines[1], "32Mi") || !strings.Contains(lines[3], "container/app") {
		t.Errorf("top -n %s: exit %d, stdout:\n%s\nstderr: %s", mine, code, stdout, stderr)
	}

	pluginConventions(ctx, t, c, guard, mine)

	// explain, live: the parts add up to the pod's usage, the volume's is du's.
	code, stdout, stderr = kubectlPlugin(ctx, t, c, "explain", "writer", "-n", mine, "-o", "json", guard)
	if code != 0 {
		t.Fatalf("explain -o json: exit %d: %s", code, stderr)
	}
	var x plugin.Explanation
	if err := json.Unmarshal([]byte(stdout), &x); err != nil {
		t.Fatal(err)
	}
	parts := map[string]int64{}
	var podUsed, volUsed, ctrUsed int64 = -1, -1, -1
	for _, l := range x.Limits {
		switch l.Kind {
		case plugin.KindPod:
			podUsed = l.UsedBytes
			for _, p := range l.Parts {
				parts[p.Name] = p.Bytes
			}
		case plugin.KindContainer:
			ctrUsed = l.UsedBytes
		case plugin.KindEmptyDir:
			volUsed = l.UsedBytes
		}
	}
	t.Logf("explain: pod %d (parts %v), container %d, volume %d (du %d)", podUsed, parts, ctrUsed, volUsed, writerData)
	if volUsed != writerData || parts["emptydir"] != writerData || podUsed != parts["emptydir"]+parts["writable_layer"]+parts["logs"]+parts["other"] ||
		parts["writable_layer"] < 6*mib || parts["writable_layer"] > 6*mib+slack || ctrUsed < 6*mib || ctrUsed > 6*mib+slack {
		t.Errorf("explain -o json: %s", stdout)
	}
	code, stdout, stderr = kubectlPlugin(ctx, t, c, "explain", "writer", "-n", mine, guard)
	t.Logf("kubectl emptydir explain writer:\n%s", stdout)
	for _, want := range []string{"emptyDir data: 12Mi used of 32Mi (37%)", "pod: 18Mi used of 64Mi (28%)", "writable_layer", "PodDisruptionBudgets: none selects this pod"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("explain: exit %d, want %q in:\n%s\nstderr: %s", code, want, stdout, stderr)
		}
	}
	if code, _, stderr := kubectlPlugin(ctx, t, c, "explain", "no-such-pod", "-n", mine, guard); code != 1 || !strings.Contains(stderr, `pod "no-such-pod" not found`) {
		t.Errorf("explain of a missing pod: exit %d, stderr %q; want 1 and not found", code, stderr)
	}
	pluginCompletes(ctx, t, c, mine, writer.Name, c.NodeName())

	// The user may list pods in mine only (and has the plugin's Role from the chart).
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}}
	if _, err := c.Client().RbacV1().Roles(mine).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "pod-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: pluginUser}}}
	if _, err := c.Client().RbacV1().RoleBindings(mine).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client().RbacV1().RoleBindings(mine).Delete(context.Background(), rb.Name, metav1.DeleteOptions{})
		_ = c.Client().RbacV1().Roles(mine).Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	as := "--as=" + pluginUser
	framework.Eventually(t, 30*time.Second, time.Second, "the user's top -A shows their namespace and nothing of another", func() (bool, string) {
		code, stdout, stderr := kubectlPlugin(ctx, t, c, "top", "-A", "-o", "json", guard, as)
		if code != 0 {
			return false, fmt.Sprintf("exit %d: %s", code, stderr)
		}
		if strings.Contains(stdout+stderr, theirs) || strings.Contains(stdout, "other") {
			t.Fatalf("a namespace the user may not list leaked into top -A:\n%s\n%s", stdout, stderr)
		}
		var l plugin.UsageList
		if err := json.Unmarshal([]byte(stdout), &l); err != nil {
			return false, err.Error()
		}
		n := 0
		for _, u := range l.Items {
			switch u.Namespace {
			case mine:
				n++
			case guardNS: // the plugin's Role lists pods there: the exporter's own emptyDirs
			default:
				t.Fatalf("the user sees %s/%s, outside %s and %s", u.Namespace, u.Pod, mine, guardNS)
			}
		}
		return n == 3, fmt.Sprintf("%d rows of %s, want writer's 3", n, mine)
	})
	if code, stdout, stderr := kubectlPlugin(ctx, t, c, "explain", "other", "-n", theirs, guard, as); code != 1 || stdout != "" || !strings.Contains(stderr, "forbidden") {
		t.Errorf("explain of another namespace's pod as the user: exit %d, stdout %q, stderr %q; want 1 and forbidden", code, stdout, stderr)
	}
}

// pluginConventions checks, through kubectl, that the plugin behaves as kubectl does with the
// writer pod of namespace ns (an emptyDir of 12 of 32 MiB, 18 of 64 MiB for the pod, 6 of 64
// MiB for its container): top POD, --sort-by, the -o set of cli-runtime, a one-line version,
// and every --help under 30 lines without kubectl's client flags, which `options` lists.
func pluginConventions(ctx context.Context, t *testing.T, c *cluster.Cluster, guard, ns string) {
	t.Helper()
	targets := func(args ...string) []string {
		t.Helper()
		code, stdout, stderr := kubectlPlugin(ctx, t, c, append([]string{"top", "writer", "-n", ns, guard, "-o", "json"}, args...)...)
		var l plugin.UsageList
		if err := json.Unmarshal([]byte(stdout), &l); code != 0 || err != nil || l.APIVersion != plugin.APIVersion || l.Kind != "UsageList" {
			t.Fatalf("top writer %v: exit %d, %v, stdout %s, stderr %s", args, code, err, stdout, stderr)
		}
		var got []string
		for _, u := range l.Items {
			got = append(got, u.Pod+" "+u.Target())
		}
		return got
	}
	for _, tc := range []struct {
		sortBy string
		want   []string
	}{
		{"", []string{"writer emptyDir/data", "writer pod", "writer container/app"}},        // 37%, 28%, 9%
		{"used", []string{"writer pod", "writer emptyDir/data", "writer container/app"}},    // 18, 12, 6 MiB
		{"limit", []string{"writer pod", "writer container/app", "writer emptyDir/data"}},   // 64, 64, 32 MiB
		{"percent", []string{"writer emptyDir/data", "writer pod", "writer container/app"}}, // the default
	} {
		var args []string
		if tc.sortBy != "" {
			args = []string{"--sort-by=" + tc.sortBy}
		}
		if got := targets(args...); !slices.Equal(got, tc.want) {
			t.Errorf("top writer --sort-by=%s: rows %q, want %q", tc.sortBy, got, tc.want)
		}
	}

	for _, tc := range []struct {
		args   []string
		stdout string
	}{
		{[]string{"top", "writer", "-o", "name"}, "pod/writer\n"},
		{[]string{"top", "-o", "name"}, "pod/writer\n"},
		{[]string{"top", "writer", "-o", "jsonpath={.items[*].pod}"}, "writer writer writer"},
		{[]string{"top", "writer", "-o", "jsonpath", "--template", "{.kind} {.source}"}, "UsageList exporters"},
		{[]string{"top", "writer", "-o", "go-template={{range .items}}{{.kind}} {{end}}"}, "emptyDir pod container "},
		{[]string{"top", "writer", "--no-headers"}, ""}, // checked below
		{[]string{"explain", "writer", "-o", "name"}, "pod/writer\n"},
		{[]string{"explain", "writer", "-o", "jsonpath={.kind}/{.pod}"}, "Explanation/writer"},
	} {
		code, stdout, stderr := kubectlPlugin(ctx, t, c, append(tc.args, "-n", ns, guard)...)
		if tc.stdout == "" {
			if lines := strings.Split(strings.TrimSpace(stdout), "\n"); code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "writer ") || !strings.Contains(lines[0], "emptyDir/data") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want 3 rows, no header", tc.args, code, stdout, stderr)
			}
			continue
		}
		if code != 0 || stdout != tc.stdout {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %q", tc.args, code, stdout, stderr, tc.stdout)
		}
	}
	code, stdout, stderr := kubectlPlugin(ctx, t, c, "top", "writer", "-n", ns, guard, "-o", "yaml")
	var l plugin.UsageList
	if err := yaml.Unmarshal([]byte(stdout), &l); code != 0 || err != nil || l.APIVersion != plugin.APIVersion || len(l.Items) != 3 || l.Items[0].Target() != "emptyDir/data" {
		t.Errorf("top writer -o yaml: exit %d, %v, stdout %s, stderr %s", code, err, stdout, stderr)
	}
	if code, _, stderr := kubectlPlugin(ctx, t, c, "top", "no-such-pod", "-n", ns, guard); code != 1 || !strings.Contains(stderr, `pod "no-such-pod" not found`) {
		t.Errorf("top of a missing pod: exit %d, stderr %q; want 1 and not found", code, stderr)
	}
	if code, _, stderr := kubectlPlugin(ctx, t, c, "top", "writer", "-n", ns, "--sort-by=memory"); code != 1 || !strings.Contains(stderr, "--sort-by accepts only percent, used, limit") {
		t.Errorf("top --sort-by=memory: exit %d, stderr %q; want 1 and the keys", code, stderr)
	}

	code, stdout, stderr = kubectlPlugin(ctx, t, c, "version")
	if code != 0 || !regexp.MustCompile(`^kubectl-emptydir \S+ \(revision \S+, go\S+, \S+/\S+\)\n$`).MatchString(stdout) {
		t.Errorf("version: exit %d, stdout %q, stderr %q; want one line", code, stdout, stderr)
	}
	code, stdout, _ = kubectlPlugin(ctx, t, c, "version", "-o", "json")
	var v struct{ Version, GoVersion string }
	if err := json.Unmarshal([]byte(stdout), &v); code != 0 || err != nil || v.Version == "" || !strings.HasPrefix(v.GoVersion, "go") {
		t.Errorf("version -o json: exit %d, %v: %s", code, err, stdout)
	}

	for _, args := range [][]string{{}, {"top"}, {"explain"}, {"recommend"}, {"policy-check"}, {"version"}, {"options"}, {"completion", "zsh"}} {
		code, stdout, stderr := kubectlPlugin(ctx, t, c, append(args, "--help")...)
		lines := strings.Count(stdout, "\n")
		if code != 0 || lines >= 30 || strings.Contains(stdout, "--kubeconfig") || !strings.Contains(stdout, `Use "kubectl emptydir options"`) {
			t.Errorf("kubectl emptydir %v --help: exit %d, %d lines (want under 30, no --kubeconfig, the hint to options), stderr %q:\n%s", args, code, lines, stderr, stdout)
		}
	}
	if code, stdout, _ := kubectlPlugin(ctx, t, c, "options"); code != 0 || !strings.Contains(stdout, "--kubeconfig string") || !strings.Contains(stdout, "-n, --namespace string") {
		t.Errorf("options: exit %d, want kubectl's client flags:\n%s", code, stdout)
	}
}

// pluginCompletes sets completion up as docs/kubectl-plugin.md tells users to (the script
// kubectl_complete-emptydir on PATH, which kubectl runs for a plugin's arguments) and checks
// that kubectl completes explain's pod argument in namespace ns and --node, by prefix.
func pluginCompletes(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, pod, node string) {
	t.Helper()
	doc, err := os.ReadFile(framework.RepoPath("docs/kubectl-plugin.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "cat > ~/.local/bin/kubectl_complete-emptydir <<'EOF'\n")
	script, _, ok2 := strings.Cut(rest, "\nEOF\n")
	if !ok || !ok2 {
		t.Fatal("docs/kubectl-plugin.md: no kubectl_complete-emptydir script")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kubectl_complete-emptydir"), []byte(script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	complete := func(args ...string) []string {
		cmd := c.Command(ctx, "kubectl", append([]string{"__complete", "emptydir"}, args...)...)
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+filepath.Dir(testbin.Path(t, "kubectl-emptydir"))+":"+os.Getenv("K8S_BIN_DIR")+":"+os.Getenv("PATH"),
			"KUBECONFIG="+c.KubeconfigPath())
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl __complete emptydir %v: %v", args, err)
		}
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	// The last line is cobra's directive: :4, no file completion.
	if got := complete("explain", "-n", ns, pod[:2]); !slices.Equal(got, []string{pod, ":4"}) {
		t.Errorf("kubectl completes explain -n %s %s with %q, want %q and no files", ns, pod[:2], got, pod)
	}
	if got := complete("explain", "-n", ns, "zz"); !slices.Equal(got, []string{":4"}) {
		t.Errorf("kubectl completes explain -n %s zz with %q, want nothing", ns, got)
	}
	if got := complete("top", "--node", node[:1]); !slices.Contains(got, node) || got[len(got)-1] != ":4" {
		t.Errorf("kubectl completes top --node %s with %q, want %q among them", node[:1], got, node)
	}
}

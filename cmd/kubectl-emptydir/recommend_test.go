package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/emptydir-guard/emptydir-guard/internal/plugin"
	"github.com/emptydir-guard/emptydir-guard/internal/recommend"
)

// cannedPrometheus answers each query by the first key it contains (podsKey: the count of
// each workload's pods; the other queries hold a count by uid in their workload join).
type cannedPrometheus map[string]model.Value

const podsKey = "count by (namespace, workload_kind, workload) (count by"

func (c cannedPrometheus) Query(_ context.Context, q string, _ time.Time, _ ...promv1.Option) (model.Value, promv1.Warnings, promv1.Infos, error) {
	for _, key := range []string{recommend.VolumeStepSeries, recommend.ContainerStepSeries, recommend.PodStepSeries,
		"emptydir_limit_bytes", "emptydir_container_ephemeral_storage_limit_bytes", podsKey} {
		if strings.Contains(q, key) {
			if v, ok := c[key]; ok {
				return v, nil, nil, nil
			}
			break
		}
	}
	if strings.Contains(q, "[") && strings.HasSuffix(q, "]") {
		return model.Matrix{}, nil, nil, nil
	}
	return model.Vector{}, nil, nil, nil
}

const mi = 1 << 20

// points is a series of n points of v, labelled.
func points(n int, v float64, labels ...string) *model.SampleStream {
	m := model.Metric{}
	for i := 0; i+1 < len(labels); i += 2 {
		m[model.LabelName(labels[i])] = model.LabelValue(labels[i+1])
	}
	s := &model.SampleStream{Metric: m}
	for i := range n {
		s.Values = append(s.Values, model.SamplePair{Timestamp: model.Time(int64(i) * 300000), Value: model.SampleValue(v)})
	}
	return s
}

// shop is a Deployment web with an emptyDir cache (no sizeLimit) and containers app and an
// init container sidecar, and a Job: what the canned Prometheus below measured.
func shopFixture() (cannedPrometheus, *fake.Clientset) {
	web := []string{"namespace", "shop", "workload_kind", "Deployment", "workload", "web"}
	job := []string{"namespace", "shop", "workload_kind", "Job", "workload", "backup-1"}
	prom := cannedPrometheus{
		recommend.VolumeStepSeries: model.Matrix{
			points(2016, 300*mi, append(web, "volume", "cache")...),
			points(12, 5*mi, append(job, "volume", "work")...),
		},
		recommend.ContainerStepSeries: model.Matrix{
			points(2016, 50*mi, append(web, "container", "app")...),
			points(2016, 20*mi, append(web, "container", "sidecar")...),
		},
		"emptydir_container_ephemeral_storage_limit_bytes": model.Vector{
			{Metric: model.Metric{"namespace": "shop", "workload_kind": "Deployment", "workload": "web", "container": "app"}, Value: 1 << 30},
		},
		podsKey: model.Vector{{Metric: model.Metric{"namespace": "shop", "workload_kind": "Deployment", "workload": "web"}, Value: 3}},
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Volumes:        []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers:     []corev1.Container{{Name: "app"}},
			InitContainers: []corev1.Container{{Name: "sidecar"}},
		}}}}
	return prom, fake.NewClientset(d)
}

// runRecommend runs recommend with args against prom and client, as the root command runs it.
func runRecommend(t *testing.T, prom cannedPrometheus, client *fake.Clientset, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	o := plugin.NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	r := &recommendOptions{Options: o, Config: recommend.DefaultConfig(), Source: string(recommend.SourceAuto), Requests: true,
		Prometheus: prom, Client: client}
	root := &cobra.Command{Use: "kubectl-emptydir", SilenceUsage: true, SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return o.Validate(cmd) }}
	o.ConfigFlags.AddFlags(root.PersistentFlags())
	root.AddCommand(recommendCmd(r))
	root.SetArgs(append([]string{"recommend"}, args...))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestRecommendTable(t *testing.T) {
	prom, client := shopFixture()
	out, _, err := runRecommend(t, prom, client, "-n", "shop")
	if err != nil {
		t.Fatal(err)
	}
	// 300Mi + 30 % = 390Mi: 448Mi (a step of 64Mi there); 50Mi + 30 % = 65Mi: 80Mi; 20Mi +
	// 30 % = 26Mi: 28Mi; requests 50Mi: 56Mi, 20Mi on the ladder.
	want := `WORKLOAD         TARGET              CURRENT   REQUEST   LIMIT   PEAK    P95     HISTORY   NOTE
job/backup-1     volume/work         <none>    -         -       5Mi     5Mi     1h        only 1h of history, 1d needed
deployment/web   volume/cache        <none>    -         448Mi   300Mi   300Mi   7d        
deployment/web   container/app       1Gi       56Mi      80Mi    50Mi    50Mi    7d        
deployment/web   container/sidecar   <none>    20Mi      28Mi    20Mi    20Mi    7d        
`
	if out != want {
		t.Errorf("table\n%s\nwant\n%s", out, want)
	}
}

func TestRecommendPatch(t *testing.T) {
	prom, client := shopFixture()
	out, _, err := runRecommend(t, prom, client, "-n", "shop", "-o", "patch")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# Job shop/backup-1: 1h of history, 0 pods\n#   volume work left out: only 1h of history, 1d needed\n#   not patched: a Job's pod template cannot change",
		"# Deployment shop/web: 7d of history, 3 pods\n",
		`kubectl patch deployment web -n shop --type strategic -p '{"spec":{"template":{"spec":{"containers":[{"name":"app","resources":{"limits":{"ephemeral-storage":"80Mi"},"requests":{"ephemeral-storage":"56Mi"}}}],"initContainers":[{"name":"sidecar","resources":{"limits":{"ephemeral-storage":"28Mi"},"requests":{"ephemeral-storage":"20Mi"}}}],"volumes":[{"name":"cache","emptyDir":{"sizeLimit":"448Mi"}}]}}}}'`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("patch output\n%s\nwants\n%s", out, want)
		}
	}
	// The patch applies as kubectl applies it: strategic merge by name sets these and keeps
	// the template's containers, init containers and volumes where they are.
	patch := out[strings.Index(out, "-p '")+4 : strings.LastIndex(out, "'")]
	d, err := client.AppsV1().Deployments("shop").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := json.Marshal(d)
	patched, err := strategicpatch.StrategicMergePatch(orig, []byte(patch), appsv1.Deployment{})
	if err != nil {
		t.Fatal(err)
	}
	var after appsv1.Deployment
	if err := json.Unmarshal(patched, &after); err != nil {
		t.Fatal(err)
	}
	spec := after.Spec.Template.Spec
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 1 || len(spec.Volumes) != 1 ||
		spec.Containers[0].Resources.Limits.StorageEphemeral().String() != "80Mi" ||
		spec.InitContainers[0].Resources.Requests.StorageEphemeral().String() != "20Mi" ||
		spec.Volumes[0].EmptyDir.SizeLimit.String() != "448Mi" {
		t.Errorf("patched template: %+v", spec)
	}
	out, _, err = runRecommend(t, prom, client, "-n", "shop", "-o", "patch", "--requests=false")
	if err != nil || strings.Contains(out, "requests") {
		t.Errorf("--requests=false: %v\n%s", err, out)
	}
}

func TestRecommendSelectorAndJSON(t *testing.T) {
	prom, client := shopFixture()
	out, _, err := runRecommend(t, prom, client, "-n", "shop", "-l", "app=web", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		APIVersion string
		Kind       string
		Items      []recommend.Suggestion
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if list.APIVersion != plugin.APIVersion || list.Kind != "RecommendationList" || len(list.Items) != 3 {
		t.Fatalf("%s", out)
	}
	for _, s := range list.Items {
		if s.Workload != "web" || s.HistorySeconds != 2016*300 {
			t.Errorf("%+v", s)
		}
	}
}

// TestRecommendName: -o name prints the workloads, each once, as kubectl get -o name does.
func TestRecommendName(t *testing.T) {
	prom, client := shopFixture()
	out, _, err := runRecommend(t, prom, client, "-n", "shop", "-o", "name")
	if want := "job.batch/backup-1\ndeployment.apps/web\n"; err != nil || out != want {
		t.Errorf("-o name: %v, %q; want %q", err, out, want)
	}
}

func TestRecommendUsage(t *testing.T) {
	prom, client := shopFixture()
	for args, want := range map[string]string{
		"--quantile 2":      "quantile 2 is not between 0 and 1",
		"--window 7d1m":     "not a whole number of steps",
		"--window x":        "invalid argument",
		"-o table":          `output format "table", allowed formats are: go-template,go-template-file,json,jsonpath,jsonpath-as-json,jsonpath-file,kyaml,name,patch,template,templatefile,wide,yaml`,
		"--source whatever": "unknown source",
	} {
		_, _, err := runRecommend(t, prom, client, strings.Fields(args)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
	var out bytes.Buffer
	o := plugin.NewOptions(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
	err := (&recommendOptions{Options: o, Config: recommend.DefaultConfig()}).Run(context.Background())
	if err == nil || !plugin.IsUsageError(err) || !strings.Contains(err.Error(), "--prometheus-url") {
		t.Errorf("without --prometheus-url: %v", err)
	}
}

// TestRecommendPatchHostile runs -o patch's script as the docs say (sh patches.sh), with a
// kubectl that records its arguments, on workloads whose Prometheus labels a tenant chose:
// an ownerReference's kind and name are not validated by the API server, and anyone who
// writes to Prometheus writes labels. Only the patch of the one valid workload may run, with
// exactly its arguments, and no line of the tenant's.
func TestRecommendPatchHostile(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh:", err)
	}
	dir := t.TempDir()
	mark, record, bin := filepath.Join(dir, "owned"), filepath.Join(dir, "kubectl.calls"), filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// The recording kubectl: a line "kubectl" per call, then each argument on its own line.
	kubectl := "#!/bin/sh\n{ echo kubectl; for a in \"$@\"; do printf '%s\\n' \"$a\"; done; } >> \"$RECORD\"\n"
	if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte(kubectl), 0o755); err != nil {
		t.Fatal(err)
	}

	// Workloads Prometheus names (namespace, kind, name), each with a container app; the API
	// server holds a workload of each valid kind by that name, as if its names were not checked.
	const touch = "touch $MARK"
	hostile := [][3]string{
		{"shop", "Deployment\n" + touch + "\n#", "web"},
		{"shop", "Deployment", "web$(" + touch + ")"},
		{"shop", "Deployment", "`" + touch + "`"},
		{"shop", "StatefulSet", "db;" + touch},
		{"shop", "Deployment", `w'e"b`},
		{"shop", "DaemonSet", "agent\r" + touch},
		{"shop", "Deployment", "web\n" + touch},
		{"shop", "Job\x1b]0;owned\a\x1b[2J", "backup"},
		{"shop'\n" + touch + "\n'", "Deployment", "web"},
	}
	prom := cannedPrometheus{}
	var containers, volumes model.Matrix
	var objs []runtime.Object
	for _, h := range hostile {
		containers = append(containers, points(2016, 50*mi, "namespace", h[0], "workload_kind", h[1], "workload", h[2], "container", "app"))
		meta := metav1.ObjectMeta{Namespace: h[0], Name: h[2]}
		tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
		switch h[1] {
		case "StatefulSet":
			objs = append(objs, &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Template: tmpl}})
		case "DaemonSet":
			objs = append(objs, &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Template: tmpl}})
		case "Deployment":
			objs = append(objs, &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Template: tmpl}})
		}
	}
	// The valid workload shop/web: its template's names are hostile too (a container's and a
	// volume's), and one container has too little history, which a comment names.
	web := []string{"namespace", "shop", "workload_kind", "Deployment", "workload", "web"}
	quoted, dollar, short := "a'b;"+touch+";'", "c$("+touch+")`"+touch+"`", "z\n"+touch
	containers = append(containers, points(2016, 50*mi, append(web, "container", quoted)...), points(12, 5*mi, append(web, "container", short)...))
	volumes = append(volumes, points(2016, 300*mi, append(web, "volume", dollar)...))
	prom[recommend.ContainerStepSeries], prom[recommend.VolumeStepSeries] = containers, volumes
	objs = append(objs, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Volumes:    []corev1.Volume{{Name: dollar, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{Name: quoted}, {Name: short}},
		}}}})

	out, _, err := runRecommend(t, prom, fake.NewClientset(objs...), "-A", "-o", "patch")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "patches.sh")
	if err := os.WriteFile(script, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sh, script)
	cmd.Dir = dir // what a tenant's line would write lands there
	cmd.Env = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "MARK=" + mark, "RECORD=" + record}
	if b, err := cmd.CombinedOutput(); err != nil || len(b) > 0 {
		t.Errorf("sh patches.sh: %v\n%q", err, b)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Errorf("sh patches.sh ran a tenant's command: %s exists; the script:\n%q", mark, out)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 3 {
		t.Errorf("sh patches.sh left %v (%v) in its directory, want only bin, kubectl.calls and patches.sh", entries, err)
	}
	calls, err := os.ReadFile(record)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	want := strings.Join([]string{"kubectl", "patch", "deployment", "web", "-n", "shop", "--type", "strategic", "-p",
		`{"spec":{"template":{"spec":{"containers":[{"name":"a'b;touch $MARK;'","resources":{"limits":{"ephemeral-storage":"80Mi"},"requests":{"ephemeral-storage":"56Mi"}}}],"volumes":[{"name":"c$(touch $MARK)` + "`touch $MARK`" + `","emptyDir":{"sizeLimit":"448Mi"}}]}}}}`,
	}, "\n") + "\n"
	if string(calls) != want {
		t.Errorf("kubectl ran with\n%q\nwant only\n%q\nthe script:\n%q", calls, want, out)
	}
	// Every comment stays one line, without a control character (the script is read too).
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if strings.ContainsFunc(line, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			t.Errorf("a line with a control character: %q", line)
		}
		if !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "kubectl patch ") {
			t.Errorf("a line neither comment nor patch: %q", line)
		}
	}
}

package helmchart_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
)

// TestCalibrationRender: with the filesystem source the exporter learns its own pod from the
// downward API and gets a 1 MiB emptyDir of its own, read-only at --calibration.dir, and
// --cgroup.root=auto by default; the kubelet source, which checks nothing, gets no emptyDir.
func TestCalibrationRender(t *testing.T) {
	with := func(v string) corev1.PodSpec {
		r := release("guard")
		if err := yaml.Unmarshal([]byte(v), &r.Values); err != nil {
			t.Fatal(err)
		}
		return deploytest.ExporterDaemonSet(t, render(t, r).objs, "guard-emptydir-exporter").Spec.Template.Spec
	}
	spec := with("{}")
	ctr := spec.Containers[0]
	wantArgs(t, "exporter", ctr.Args, "--cgroup.root=auto")
	dirs := deploytest.ArgValues(ctr.Args, "calibration.dir")
	if len(dirs) != 1 {
		t.Fatalf("exporter args %v: want one --calibration.dir", ctr.Args)
	}
	m, v := mountAt(spec, dirs[0])
	if m == nil || v == nil || v.EmptyDir == nil || !m.ReadOnly || m.SubPath != "" ||
		v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Cmp(resource.MustParse("1Mi")) != 0 || v.EmptyDir.Medium != corev1.StorageMediumDefault {
		t.Errorf("at --calibration.dir=%s: mount %+v of volume %+v, want a disk emptyDir of 1Mi, read-only", dirs[0], m, v)
	}
	for name, field := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace", "POD_UID": "metadata.uid"} {
		i := slices.IndexFunc(ctr.Env, func(e corev1.EnvVar) bool { return e.Name == name })
		if i < 0 || ctr.Env[i].ValueFrom == nil || ctr.Env[i].ValueFrom.FieldRef == nil || ctr.Env[i].ValueFrom.FieldRef.FieldPath != field {
			t.Errorf("exporter env %s: want it from the downward API's %s (env %+v)", name, field, ctr.Env)
		}
	}
	kubelet := with("exporter: {source: kubelet}")
	if got := deploytest.ArgValues(kubelet.Containers[0].Args, "calibration.dir"); len(got) > 0 {
		t.Errorf("source kubelet: --calibration.dir=%v, want none", got)
	}
	for _, v := range kubelet.Volumes {
		if v.EmptyDir != nil {
			t.Errorf("source kubelet: emptyDir %s, want none (nothing to check)", v.Name)
		}
	}
}

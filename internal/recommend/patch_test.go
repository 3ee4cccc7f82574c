package recommend

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestPatch: a suggestion goes where its name is in the template, containers and init
// containers apart; a name the template lacks is left out (strategic merge would add it), as
// is a target without a suggestion; kinds whose template cannot change get no patch.
func TestPatch(t *testing.T) {
	tmpl := &corev1.PodSpec{
		Volumes: []corev1.Volume{
			{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
		},
		Containers:     []corev1.Container{{Name: "app"}},
		InitContainers: []corev1.Container{{Name: "proxy"}},
	}
	s := func(k Kind, name string, req, lim float64) Suggestion {
		return Suggestion{Target: Target{Kind: k, Name: name}, Request: req, Limit: lim}
	}
	ss := []Suggestion{
		s(KindVolume, "cache", 0, 512*mi), s(KindVolume, "config", 0, 16*mi), s(KindVolume, "gone", 0, 16*mi),
		s(KindContainer, "app", 64*mi, 80*mi), s(KindContainer, "proxy", 16*mi, 16*mi), s(KindContainer, "old", 16*mi, 16*mi),
		s(KindContainer, "young", 0, 0), s(KindPod, "", 96*mi, 1024*mi),
	}
	patch, skipped, err := Patch("StatefulSet", tmpl, ss, true)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"spec":{"template":{"spec":{"containers":[{"name":"app","resources":{"limits":{"ephemeral-storage":"80Mi"},"requests":{"ephemeral-storage":"64Mi"}}}],"initContainers":[{"name":"proxy","resources":{"limits":{"ephemeral-storage":"16Mi"},"requests":{"ephemeral-storage":"16Mi"}}}],"volumes":[{"name":"cache","emptyDir":{"sizeLimit":"512Mi"}}]}}}}`
	if string(patch) != want {
		t.Errorf("patch\n%s\nwant\n%s", patch, want)
	}
	wantSkipped := []string{"volume config: no emptyDir of that name in the pod template", "volume gone: no emptyDir of that name in the pod template", "container old: not in the pod template"}
	if !slices.Equal(skipped, wantSkipped) {
		t.Errorf("skipped %q, want %q", skipped, wantSkipped)
	}
	if patch, _, _ := Patch("Deployment", tmpl, []Suggestion{s(KindContainer, "young", 0, 0)}, true); patch != nil {
		t.Errorf("a patch without suggestions: %s", patch)
	}
	for _, kind := range []string{"Job", "Pod", "Workflow"} {
		if _, _, err := Patch(kind, tmpl, ss, true); err == nil {
			t.Errorf("%s patched", kind)
		}
	}
}

// TestPatchCommand: the command is one line of POSIX shell whatever the patch holds, and a
// workload whose labels are no valid Kubernetes names gets none.
func TestPatchCommand(t *testing.T) {
	patch := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"a'b;$(id)` + "`id`" + `"}]}}}}`)
	got, err := PatchCommand(Workload{"shop", "Deployment", "web"}, "deployment", patch)
	want := `kubectl patch deployment web -n shop --type strategic -p '{"spec":{"template":{"spec":{"containers":[{"name":"a'\''b;$(id)` + "`id`" + `"}]}}}}'`
	if err != nil || got != want {
		t.Errorf("PatchCommand = %s, %v\nwant %s", got, err, want)
	}
	for _, w := range []Workload{
		{"shop", "Deployment\ntouch /tmp/x\n#", "web"}, {"shop", "Deployment", "web$(id)"}, {"shop", "Deployment", "`id`"},
		{"shop", "Deployment", "web;id"}, {"shop", "Deployment", `w'e"b`}, {"shop", "Deployment", "web\rid"},
		{"shop", "Job\x1b[2J", "web"}, {"shop\nid", "Deployment", "web"}, {"", "Deployment", "web"},
	} {
		if what, _ := w.Invalid(); what == "" {
			t.Errorf("%q is valid", w)
		}
		if got, err := PatchCommand(w, "deployment", []byte("{}")); err == nil {
			t.Errorf("%q: command %s", w, got)
		}
	}
	for s, want := range map[string]string{
		"web": "web", "a-b.c_d:e/f=g@h%i+j,k": "a-b.c_d:e/f=g@h%i+j,k", "": "''", "a b": "'a b'", "it's": `'it'\''s'`,
		"$(id)": "'$(id)'", "`id`": "'`id`'", "a\nb": "'a\nb'", "~": "'~'", "*": "'*'", `\`: `'\'`, "''": `''\'''\'''`,
	} {
		if got := ShellQuote(s); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", s, got, want)
		}
	}
}

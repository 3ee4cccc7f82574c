package recommend

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/emptydir-guard/emptydir-guard/internal/kubename"
)

// Workload is a workload's identity as the suggestions name it.
type Workload struct {
	Namespace, Kind, Name string
}

// WorkloadOf is the workload s is for.
func WorkloadOf(s Suggestion) Workload { return Workload{s.Namespace, s.WorkloadKind, s.Workload} }

// Invalid names the first of w's namespace, kind and name that is no valid Kubernetes name,
// and its value; "" when all are. They are labels read from Prometheus, which others write
// to: a workload with an invalid one is never named in a command.
func (w Workload) Invalid() (what, value string) {
	switch {
	case !kubename.IsNamespace(w.Namespace):
		return "namespace", w.Namespace
	case !kubename.IsKind(w.Kind):
		return "kind", w.Kind
	case !kubename.IsObjectName(w.Name):
		return "name", w.Name
	}
	return "", ""
}

// PatchCommand is the kubectl patch command, one line of POSIX shell, that applies patch to
// w (resource is kubectl's name of its kind: deployment); an error, and no command, when
// w.Invalid.
func PatchCommand(w Workload, resource string, patch []byte) (string, error) {
	if what, value := w.Invalid(); what != "" {
		return "", fmt.Errorf("the workload's %s %q is no valid Kubernetes name", what, value)
	}
	args := []string{"kubectl", "patch", resource, w.Name, "-n", w.Namespace, "--type", "strategic", "-p", string(patch)}
	for i, a := range args {
		args[i] = ShellQuote(a)
	}
	return strings.Join(args, " "), nil
}

// ShellQuote is s as one word of POSIX shell: s itself when it is made of characters no
// shell treats specially, else s in single quotes, where each single quote of s ends the
// quoted part, is escaped with a backslash, and starts the next.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,:/=@%+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Patchable says whether kubectl patch can change the pod template of a workload of kind, and
// where the template sits in it; why not otherwise.
func Patchable(kind string) (path []string, why string) {
	switch kind {
	case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet":
		return []string{"spec", "template", "spec"}, ""
	case "Job":
		return nil, "a Job's pod template cannot change: set these in what creates it (a CronJob's jobTemplate)"
	case "Pod":
		return nil, "a pod's ephemeral storage and volumes cannot change: set these in what creates it"
	}
	return nil, "a " + kind + " is no workload kubectl patch knows the pod template of: set these in its pod template"
}

// volumePatch and containerPatch are the strategic-merge entries of one volume and one
// container: merged into the template's by name, they change nothing else.
type volumePatch struct {
	Name     string            `json:"name"`
	EmptyDir map[string]string `json:"emptyDir"`
}

type containerPatch struct {
	Name      string                       `json:"name"`
	Resources map[string]map[string]string `json:"resources"`
}

// Patch is the strategic-merge patch that sets the suggestions ss of one workload into its
// pod template spec: each volume's sizeLimit, each container's ephemeral-storage request
// (unless requests is false) and limit. A suggestion the template has no place for (a volume
// or container it no longer has, or no emptyDir by that name) is left out and named in
// skipped: strategic merge would add a container or volume by an unknown name. nil when
// nothing is to be patched.
func Patch(kind string, tmpl *corev1.PodSpec, ss []Suggestion, requests bool) (patch []byte, skipped []string, err error) {
	path, why := Patchable(kind)
	if path == nil {
		return nil, nil, fmt.Errorf("%s", why)
	}
	spec := map[string]any{}
	var volumes []volumePatch
	var containers, initContainers []containerPatch
	for _, s := range ss {
		if s.Limit == 0 {
			continue
		}
		switch s.Kind {
		case KindVolume:
			if !slices.ContainsFunc(tmpl.Volumes, func(v corev1.Volume) bool { return v.Name == s.Name && v.EmptyDir != nil }) {
				skipped = append(skipped, "volume "+s.Name+": no emptyDir of that name in the pod template")
				continue
			}
			volumes = append(volumes, volumePatch{s.Name, map[string]string{"sizeLimit": Format(s.Limit)}})
		case KindContainer:
			c := containerPatch{s.Name, map[string]map[string]string{"limits": {"ephemeral-storage": Format(s.Limit)}}}
			if requests {
				c.Resources["requests"] = map[string]string{"ephemeral-storage": Format(s.Request)}
			}
			named := func(c corev1.Container) bool { return c.Name == s.Name }
			switch {
			case slices.ContainsFunc(tmpl.Containers, named):
				containers = append(containers, c)
			case slices.ContainsFunc(tmpl.InitContainers, named):
				initContainers = append(initContainers, c)
			default:
				skipped = append(skipped, "container "+s.Name+": not in the pod template")
			}
		}
	}
	if len(volumes) > 0 {
		spec["volumes"] = volumes
	}
	if len(containers) > 0 {
		spec["containers"] = containers
	}
	if len(initContainers) > 0 {
		spec["initContainers"] = initContainers
	}
	if len(spec) == 0 {
		return nil, skipped, nil
	}
	var doc any = spec
	for i := len(path) - 1; i >= 0; i-- {
		doc = map[string]any{path[i]: doc}
	}
	patch, err = json.Marshal(doc)
	return patch, skipped, err
}

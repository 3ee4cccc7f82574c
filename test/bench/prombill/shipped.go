package prombill

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"sigs.k8s.io/yaml"
)

// repoRoot is the repository root, from this package's directory.
const repoRoot = "../../.."

// shippedRules is the rules file the shipped profiles load.
var shippedRules = filepath.Join(repoRoot, "rules", "emptydir-guard.rules.yml")

// podMonitor is the part of the exporter's PodMonitor a profile's scrape jobs come from.
type podMonitor struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		PodMetricsEndpoints []struct {
			Path        string              `json:"path"`
			Params      map[string][]string `json:"params"`
			Interval    string              `json:"interval"`
			Relabelings []struct {
				TargetLabel string `json:"targetLabel"`
				Replacement string `json:"replacement"`
			} `json:"relabelings"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// kustomizePatch is one patch of a kustomize component. Applied here, not by krusty: that would
// add sigs.k8s.io/kustomize to this module (its tests: 857 -> 949 packages) for two patch shapes.
type kustomizePatch struct {
	Target struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
	} `json:"target"`
	Patch string `json:"patch"`
}

// shippedProfile is the profile the kustomize base installs with components/monitoring and the
// given components: the exporter PodMonitor's endpoints, patched by the components, are the
// scrape jobs (each named by its job relabeling, else emptydir-exporter); the arguments the
// components append to the exporter's give its metric lists; the rules are the shipped ones.
func shippedProfile(name string, components ...string) (profile, error) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy/components/monitoring/podmonitors.yaml"))
	if err != nil {
		return profile{}, err
	}
	var pm []byte
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var m podMonitor
		if err := yaml.Unmarshal([]byte(doc), &m); err == nil && m.Metadata.Name == "emptydir-exporter" {
			if pm, err = yaml.YAMLToJSON([]byte(doc)); err != nil {
				return profile{}, err
			}
		}
	}
	if pm == nil {
		return profile{}, errors.New("components/monitoring: no PodMonitor emptydir-exporter")
	}
	var args []string
	for _, c := range components {
		k, err := os.ReadFile(filepath.Join(repoRoot, "deploy/components", c, "kustomization.yaml"))
		if err != nil {
			return profile{}, err
		}
		var kust struct {
			Patches []kustomizePatch `json:"patches"`
		}
		if err := yaml.Unmarshal(k, &kust); err != nil {
			return profile{}, fmt.Errorf("components/%s: %w", c, err)
		}
		for _, p := range kust.Patches {
			ops, err := yaml.YAMLToJSON([]byte(p.Patch))
			if err != nil {
				return profile{}, fmt.Errorf("components/%s: %w", c, err)
			}
			switch {
			case p.Target.Kind == "PodMonitor" && p.Target.Name == "emptydir-exporter":
				patch, err := jsonpatch.DecodePatch(ops)
				if err != nil {
					return profile{}, fmt.Errorf("components/%s: %w", c, err)
				}
				if pm, err = patch.Apply(pm); err != nil {
					return profile{}, fmt.Errorf("components/%s: %w", c, err)
				}
			case p.Target.Kind == "DaemonSet" && p.Target.Name == "emptydir-exporter":
				var added []struct {
					Op, Path string
					Value    any
				}
				if err := yaml.Unmarshal(ops, &added); err != nil {
					return profile{}, err
				}
				for _, op := range added {
					if op.Op != "add" || !strings.HasSuffix(op.Path, "/args/-") {
						return profile{}, fmt.Errorf("components/%s: %s %s: only appended arguments are measured", c, op.Op, op.Path)
					}
					args = append(args, fmt.Sprint(op.Value))
				}
			}
		}
	}
	var m podMonitor
	if err := yaml.Unmarshal(pm, &m); err != nil {
		return profile{}, err
	}
	p := profile{name: name, rules: shippedRules}
	for _, ep := range m.Spec.PodMetricsEndpoints {
		iv, err := time.ParseDuration(ep.Interval)
		if err != nil {
			return profile{}, fmt.Errorf("PodMonitor endpoint interval: %w", err)
		}
		job := scrapeJob{name: "emptydir-exporter", path: ep.Path, params: url.Values(ep.Params), interval: iv}
		for _, r := range ep.Relabelings {
			if r.TargetLabel == "job" {
				job.name = r.Replacement[strings.LastIndex(r.Replacement, "/")+1:]
			}
		}
		p.jobs = append(p.jobs, job)
	}
	lists := map[string][]string{}
	for _, a := range args {
		flag, value, ok := strings.Cut(a, "=")
		if !ok {
			return profile{}, fmt.Errorf("argument %q: want --flag=value", a)
		}
		lists[flag] = strings.Split(value, ",")
	}
	p.handler = commandHandler(lists["--metric-allowlist"], lists["--metric-denylist"], lists["--metric-opt-in-list"])
	return p, nil
}

package helmchart_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/deploy"
	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
	helmchart "github.com/emptydir-guard/emptydir-guard/test/helm"
)

// chartMeta is what the tests read of Chart.yaml.
type chartMeta struct {
	Version     string            `json:"version"`
	AppVersion  string            `json:"appVersion"`
	Home        string            `json:"home"`
	Icon        string            `json:"icon"`
	Sources     []string          `json:"sources"`
	Annotations map[string]string `json:"annotations"`
	Maintainers []struct {
		Name string `json:"name"`
		URL  string `json:"url"`
	} `json:"maintainers"`
}

func readChart(t *testing.T) chartMeta {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, helmchart.ChartPath, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c chartMeta
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("Chart.yaml: %v", err)
	}
	return c
}

// defaultImage is the image the chart runs when image.tag is empty: values.yaml's
// image.repository, tagged v<appVersion> (the release's git tag).
func defaultImage(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, helmchart.ChartPath, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"image"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	if v.Image.Tag != "" {
		t.Fatalf("values.yaml sets image.tag %q: the default tag is the chart's appVersion", v.Image.Tag)
	}
	return v.Image.Repository + ":v" + readChart(t).AppVersion
}

// semver is a semantic version without its leading v, as Helm wants a chart's version.
var semver = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// TestChartMetadata: Chart.yaml carries one release version (version = appVersion, semver
// without the tag's v), and Artifact Hub's annotations agree with it, values.yaml and LICENSE.
func TestChartMetadata(t *testing.T) {
	c := readChart(t)
	if !semver.MatchString(c.Version) || c.AppVersion != c.Version {
		t.Errorf("version %q, appVersion %q: want one semver X.Y.Z (the git tag vX.Y.Z without its v) for both", c.Version, c.AppVersion)
	}
	const repo = "https://github.com/emptydir-guard/emptydir-guard"
	if c.Home != repo || !slices.Contains(c.Sources, repo) || len(c.Maintainers) == 0 || c.Maintainers[0].URL != repo {
		t.Errorf("home %q, sources %q, maintainers %+v: want the repository %s", c.Home, c.Sources, c.Maintainers, repo)
	}

	// The icon Artifact Hub and Helm show: a file of this repository at main.
	const raw = "https://raw.githubusercontent.com/emptydir-guard/emptydir-guard/main/"
	if icon, ok := strings.CutPrefix(c.Icon, raw); !ok {
		t.Errorf("icon %q: want a file of the repository, %s<path>", c.Icon, raw)
	} else if b, err := os.ReadFile(filepath.Join(root, icon)); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("icon %s: %v, not an SVG file of the repository", icon, err)
	}

	a := c.Annotations
	if a["artifacthub.io/license"] != "Apache-2.0" {
		t.Errorf("artifacthub.io/license %q, want Apache-2.0", a["artifacthub.io/license"])
	}
	license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil || !strings.Contains(string(license), "Apache License") || !strings.Contains(string(license), "Version 2.0, January 2004") {
		t.Errorf("LICENSE is not the Apache License 2.0 (%v)", err)
	}
	if want := map[bool]string{true: "true", false: "false"}[strings.HasPrefix(c.Version, "0.")]; a["artifacthub.io/prerelease"] != want {
		t.Errorf("artifacthub.io/prerelease %q, want %q for version %s (0.x is a pre-release)", a["artifacthub.io/prerelease"], want, c.Version)
	}
	if s := a["artifacthub.io/containsSecurityUpdates"]; s != "true" && s != "false" {
		t.Errorf("artifacthub.io/containsSecurityUpdates %q, want \"true\" or \"false\"", s)
	}

	var images []struct{ Name, Image string }
	if err := yaml.Unmarshal([]byte(a["artifacthub.io/images"]), &images); err != nil || len(images) != 1 || images[0].Image != defaultImage(t) {
		t.Errorf("artifacthub.io/images %+v (%v): want the one image the chart runs, %s", images, err, defaultImage(t))
	}
	var changes []struct{ Kind, Description string }
	if err := yaml.Unmarshal([]byte(a["artifacthub.io/changes"]), &changes); err != nil || len(changes) == 0 {
		t.Errorf("artifacthub.io/changes: %v, %d changes", err, len(changes))
	}
	for _, ch := range changes {
		if !slices.Contains([]string{"added", "changed", "deprecated", "removed", "fixed", "security"}, ch.Kind) || ch.Description == "" {
			t.Errorf("artifacthub.io/changes: %+v has no Artifact Hub kind or no description", ch)
		}
	}
	var links []struct{ Name, URL string }
	if err := yaml.Unmarshal([]byte(a["artifacthub.io/links"]), &links); err != nil || len(links) == 0 {
		t.Errorf("artifacthub.io/links: %v, %d links", err, len(links))
	}
	for _, l := range links {
		if l.Name == "" || !strings.HasPrefix(l.URL, repo+"/") {
			t.Errorf("artifacthub.io/links: %+v", l)
		}
	}
}

// TestImageTag: the image tag is v<appVersion> (an appVersion packaged with its v taken as it
// is), image.tag overrides it, and app.kubernetes.io/version names the tag run.
func TestImageTag(t *testing.T) {
	// A root with only the chart, whose appVersion each case rewrites.
	fake := t.TempDir()
	if err := os.CopyFS(filepath.Join(fake, helmchart.ChartPath), os.DirFS(filepath.Join(root, helmchart.ChartPath))); err != nil {
		t.Fatal(err)
	}
	chartFile := filepath.Join(fake, helmchart.ChartPath, "Chart.yaml")
	orig, err := os.ReadFile(chartFile)
	if err != nil {
		t.Fatal(err)
	}
	appVersion := regexp.MustCompile(`(?m)^appVersion: .*$`)
	if !appVersion.Match(orig) {
		t.Fatal("Chart.yaml has no appVersion line")
	}
	repo := strings.TrimSuffix(defaultImage(t), ":v"+readChart(t).AppVersion)
	for _, tc := range []struct{ appVersion, tag, wantTag, wantLabel string }{
		{"1.2.3", "", "v1.2.3", "v1.2.3"},
		{"v1.2.3", "", "v1.2.3", "v1.2.3"},
		{"0.1.0-2-gb6b09c7-dirty", "", "v0.1.0-2-gb6b09c7-dirty", "v0.1.0-2-gb6b09c7-dirty"},
		{"1.2.3+build.1", "", "v1.2.3+build.1", "v1.2.3_build.1"},
		{"1.2.3", "sha-abc", "sha-abc", "sha-abc"},
	} {
		t.Run(tc.appVersion+"/"+tc.tag, func(t *testing.T) {
			if err := os.WriteFile(chartFile, appVersion.ReplaceAll(orig, []byte("appVersion: \""+tc.appVersion+"\"")), 0o644); err != nil {
				t.Fatal(err)
			}
			r := release("emptydir-guard")
			if tc.tag != "" {
				r.Values = map[string]any{"image": map[string]any{"tag": tc.tag}}
			}
			files, err := helmchart.Render(fake, r)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := deploy.Decode([]byte(files["templates/exporter/daemonset.yaml"] + "\n---\n" + files["templates/remediator/deployment.yaml"]))
			if err != nil {
				t.Fatal(err)
			}
			ds := deploytest.MustFind[*appsv1.DaemonSet](t, objs, "emptydir-exporter")
			dep := deploytest.MustFind[*appsv1.Deployment](t, objs, "emptydir-remediator")
			want := repo + ":" + tc.wantTag
			if got := ds.Spec.Template.Spec.Containers[0].Image; got != want {
				t.Errorf("exporter image %s, want %s", got, want)
			}
			if got := dep.Spec.Template.Spec.Containers[0].Image; got != want {
				t.Errorf("remediator image %s, want %s", got, want)
			}
			if got := ds.Labels["app.kubernetes.io/version"]; got != tc.wantLabel {
				t.Errorf("app.kubernetes.io/version %q, want %q", got, tc.wantLabel)
			}
		})
	}
}

// TestKustomizeBaseRunsTheRelease: `kubectl apply -k deploy/` runs the image the chart's
// appVersion names, a tag the release publishes, not one nothing publishes (such as latest).
func TestKustomizeBaseRunsTheRelease(t *testing.T) {
	want := defaultImage(t)
	n := 0
	for _, o := range kustomizeBuild(t) {
		var spec *corev1.PodSpec
		switch w := o.(type) {
		case *appsv1.DaemonSet:
			spec = &w.Spec.Template.Spec
		case *appsv1.Deployment:
			spec = &w.Spec.Template.Spec
		default:
			continue
		}
		for _, c := range spec.Containers {
			n++
			if c.Image != want {
				t.Errorf("%s container %s runs %s, want the chart's release image %s", o.GetObjectKind().GroupVersionKind().Kind, c.Name, c.Image, want)
			}
		}
	}
	if n < 2 {
		t.Errorf("the kustomize base has %d containers, want the exporter's and the remediator's", n)
	}
}

// TestReadmeInstallsTheChartVersion: the install command of the README and of docs/release.md
// names the chart's version, so a release that bumps it cannot leave them installing an older one.
func TestReadmeInstallsTheChartVersion(t *testing.T) {
	want := readChart(t).Version
	// --version X, or --version $v after v=X.
	re := regexp.MustCompile(`oci://ghcr\.io/emptydir-guard/charts/emptydir-guard --version ([^$\s]+)|(?m)^v=(\S+)$`)
	for _, doc := range []string{"README.md", "docs/release.md"} {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		ms := re.FindAllStringSubmatch(string(b), -1)
		if len(ms) == 0 {
			t.Errorf("%s: no install command of the chart from its registry", doc)
		}
		for _, m := range ms {
			if got := m[1] + m[2]; got != want {
				t.Errorf("%s installs chart version %s (%q), want Chart.yaml's %s", doc, got, m[0], want)
			}
		}
	}
}

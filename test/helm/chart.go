// Package helmchart renders and lints the emptydir-guard Helm chart (deploy/helm/emptydir-guard)
// with Helm's own packages, pinned in this module so that the product's go.mod stays free of
// them. The tests of this package check the chart; cmd/gen-deploy renders the
// kustomize base (deploy/) from it.
package helmchart

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"sigs.k8s.io/yaml"
)

// ChartPath is the chart, relative to the repository root.
const ChartPath = "deploy/helm/emptydir-guard"

// Release says what `helm template <Name> --namespace <Namespace> -f <ValuesFiles>...` says.
type Release struct {
	Name        string
	Namespace   string
	ValuesFiles []string       // read in order, later ones win, like -f
	Values      map[string]any // merged last, like --set
	Cluster     *Cluster       // what helm install sees of the cluster; nil: none, like helm template
}

// Cluster is what `helm install` reads of a cluster while rendering: the API resources it
// serves (.Capabilities.APIVersions, as "group/version/Kind") and the objects lookup finds.
type Cluster struct {
	APIResources []string
	Objects      []*unstructured.Unstructured
}

// GetClientFor serves lookup from the cluster's objects, as Helm's client provider does from
// the API server (every kind namespaced).
func (c *Cluster) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	listKinds := map[schema.GroupVersionResource]string{gvr: kind + "List"}
	objs := make([]runtime.Object, 0, len(c.Objects))
	for _, o := range c.Objects {
		objs = append(objs, o.DeepCopy())
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...)
	return client.Resource(gvr), true, nil
}

// Values reads and merges the release's values files and Values.
func (r Release) values() (map[string]any, error) {
	merged := map[string]any{}
	for _, f := range r.ValuesFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var v map[string]any
		if err := yaml.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		merged = loader.MergeMaps(merged, v)
	}
	return loader.MergeMaps(merged, r.Values), nil
}

// Render renders the chart in root for the release, checking the values against the chart's
// values.schema.json as `helm template` does. The result maps each template (by its path in
// the chart, e.g. "templates/exporter/daemonset.yaml") to its output; templates that render
// nothing but blank lines are left out.
func Render(root string, r Release) (map[string]string, error) {
	ch, err := loader.Load(filepath.Join(root, ChartPath))
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	vals, err := r.values()
	if err != nil {
		return nil, err
	}
	var caps *common.Capabilities
	if r.Cluster != nil {
		c := *common.DefaultCapabilities
		c.APIVersions = append(slices.Clone(c.APIVersions), r.Cluster.APIResources...)
		caps = &c
	}
	top, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals,
		common.ReleaseOptions{Name: r.Name, Namespace: r.Namespace, Revision: 1, IsInstall: true}, caps, false)
	if err != nil {
		return nil, err
	}
	var out map[string]string
	if r.Cluster != nil {
		out, err = engine.RenderWithClientProvider(ch, top, r.Cluster)
	} else {
		out, err = engine.Render(ch, top)
	}
	if err != nil {
		return nil, err
	}
	rendered := map[string]string{}
	prefix := ch.Name() + "/"
	for name, s := range out {
		if strings.TrimSpace(s) == "" {
			continue
		}
		rendered[strings.TrimPrefix(name, prefix)] = s
	}
	return rendered, nil
}

// Lint runs `helm lint --strict` on the chart in root with the values of r: warnings fail too.
func Lint(root string, r Release) error {
	vals, err := r.values()
	if err != nil {
		return err
	}
	l := action.NewLint()
	l.Strict = true
	l.Namespace = r.Namespace
	res := l.Run([]string{filepath.Join(root, ChartPath)}, vals)
	var errs []error
	for _, m := range res.Messages {
		errs = append(errs, errors.New(m.Error()))
	}
	if len(errs) == 0 {
		errs = res.Errors
	}
	if len(res.Errors) == 0 {
		return nil
	}
	return errors.Join(errs...)
}

package helmchart

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/emptydir-guard/emptydir-guard/internal/docsection"
)

// ChartReadme is the chart's README, relative to the repository root; its section
// ValuesSection is generated from the chart's values.yaml.
const (
	ChartReadme   = ChartPath + "/README.md"
	ValuesSection = "values"
)

// verbatim are the values the chart passes whole into a Kubernetes object (a pod spec, a
// NetworkPolicyPeer): one row each, their default shown whole, not a row per field.
var verbatim = map[string]bool{
	"resources": true, "affinity": true, "nodeSelector": true, "tolerations": true,
	"podSecurityContext": true, "securityContext": true, "updateStrategy": true,
	"namespaceSelector": true, "podSelector": true,
}

// ValuesTable is the Markdown table of a chart's values.yaml: a row per value (a scalar, a
// list, an empty map or a verbatim object) and per commented map, with its default and the
// comment above its key (Helm's "-- " prefix dropped) as its description.
func ValuesTable(valuesYAML []byte) (string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(valuesYAML, &doc); err != nil {
		return "", err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return "", fmt.Errorf("values.yaml is not a map")
	}
	var b strings.Builder
	b.WriteString("| value | default | description |\n| --- | --- | --- |\n")
	var walk func(m *yaml.Node, prefix string) error
	walk = func(m *yaml.Node, prefix string) error {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			// Helm's --set spelling: a dot inside a key is escaped.
			path := prefix + strings.ReplaceAll(k.Value, ".", `\.`)
			desc := comment(k.HeadComment)
			if v.Kind == yaml.MappingNode && len(v.Content) > 0 && !verbatim[k.Value] {
				if desc != "" {
					fmt.Fprintf(&b, "| `%s` | | %s |\n", path, desc)
				}
				if err := walk(v, path+"."); err != nil {
					return err
				}
				continue
			}
			var val any
			if err := v.Decode(&val); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			def, err := json.Marshal(val)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", path, strings.ReplaceAll(string(def), "|", `\|`), desc)
		}
		return nil
	}
	if err := walk(doc.Content[0], ""); err != nil {
		return "", err
	}
	return b.String(), nil
}

// comment is a YAML head comment as one line of Markdown.
func comment(c string) string {
	var words []string
	for _, line := range strings.Split(c, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		line = strings.TrimPrefix(line, "-- ")
		if line != "" {
			words = append(words, line)
		}
	}
	// Kept inside its table cell, and <placeholders> shown, not taken for HTML.
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(strings.Join(words, " "))
}

// chartReadme is the chart README in root with its values table generated from values.yaml.
func chartReadme(root string) ([]byte, error) {
	values, err := os.ReadFile(filepath.Join(root, ChartPath, "values.yaml"))
	if err != nil {
		return nil, err
	}
	table, err := ValuesTable(values)
	if err != nil {
		return nil, fmt.Errorf("%s/values.yaml: %w", ChartPath, err)
	}
	old, err := os.ReadFile(filepath.Join(root, ChartReadme))
	if err != nil {
		return nil, err
	}
	out, err := docsection.Apply(old, ValuesSection, "make generate: test/helm/cmd/gen-deploy from values.yaml", table)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ChartReadme, err)
	}
	return out, nil
}

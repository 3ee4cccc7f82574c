package helmchart

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/emptydir-guard/emptydir-guard/internal/docsection"
)

// ChartReadme is the chart's README, relative to the repository root; its section
// ValuesSection is generated from the chart's values.yaml and values.schema.json.
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

// ValuesDoc is the values table of a chart and the values it leaves undescribed.
type ValuesDoc struct {
	// Table is the Markdown table: a row per value (a scalar, a list, an empty map or a
	// verbatim object) and per commented map, with its type, its default and its comment.
	Table string
	// Values counts the value rows; Undocumented are those of them (by --set path) whose key
	// has no comment and whose schema no description, so that their description is empty.
	Values       int
	Undocumented []string
}

// ValuesTable is the Markdown table of a chart's values.yaml: a row per value (a scalar, a
// list, an empty map or a verbatim object) and per commented map, with its type (from the
// chart's values.schema.json where it says, else from the YAML), its default, and the comments
// above and beside its key (Helm's "-- " prefix dropped) as its description, else the schema's
// description. A value with neither gets an empty description and is listed in Undocumented.
// schemaJSON may be nil.
func ValuesTable(valuesYAML, schemaJSON []byte) (ValuesDoc, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(valuesYAML, &doc); err != nil {
		return ValuesDoc{}, err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return ValuesDoc{}, fmt.Errorf("values.yaml is not a map")
	}
	var schema map[string]any
	if len(schemaJSON) > 0 {
		if err := json.Unmarshal(schemaJSON, &schema); err != nil {
			return ValuesDoc{}, fmt.Errorf("values.schema.json: %w", err)
		}
	}
	var out ValuesDoc
	var b strings.Builder
	b.WriteString("| key | type | default | description |\n| --- | --- | --- | --- |\n")
	var walk func(m *yaml.Node, prefix string, schema map[string]any) error
	walk = func(m *yaml.Node, prefix string, schema map[string]any) error {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			// Helm's --set spelling: a dot inside a key is escaped.
			path := prefix + strings.ReplaceAll(k.Value, ".", `\.`)
			sub := property(schema, k.Value)
			desc := comment(k.HeadComment, k.LineComment, v.LineComment)
			if d, ok := sub["description"].(string); ok && desc == "" {
				desc = markdown(d)
			}
			if v.Kind == yaml.MappingNode && len(v.Content) > 0 && !verbatim[k.Value] {
				if desc != "" {
					fmt.Fprintf(&b, "| `%s` | %s | | %s |\n", path, typeOf(sub, v), desc)
				}
				if err := walk(v, path+".", sub); err != nil {
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
			out.Values++
			if desc == "" {
				out.Undocumented = append(out.Undocumented, path)
			}
			fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", path, typeOf(sub, v), cell(string(def)), desc)
		}
		return nil
	}
	if err := walk(doc.Content[0], "", schema); err != nil {
		return ValuesDoc{}, err
	}
	out.Table = b.String()
	return out, nil
}

// property is the schema of key inside the object schema s, or nil.
func property(s map[string]any, key string) map[string]any {
	props, _ := s["properties"].(map[string]any)
	p, _ := props[key].(map[string]any)
	return p
}

// typeOf is a value's type as JSON Schema names it: the schema's type(s), its enum's values,
// the types of its anyOf/oneOf alternatives; where the schema says nothing, the YAML
// value's own (none for a null).
func typeOf(s map[string]any, v *yaml.Node) string {
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		vals := make([]string, 0, len(enum))
		for _, e := range enum {
			j, _ := json.Marshal(e)
			vals = append(vals, "`"+cell(string(j))+"`")
		}
		return "one of " + strings.Join(vals, ", ")
	}
	if types := schemaTypes(s); len(types) > 0 {
		return strings.Join(types, " or ")
	}
	switch v.Kind {
	case yaml.MappingNode:
		return "object"
	case yaml.SequenceNode:
		return "array"
	case yaml.ScalarNode:
		return map[string]string{"!!str": "string", "!!int": "integer", "!!float": "number", "!!bool": "boolean"}[v.ShortTag()]
	}
	return ""
}

// schemaTypes are the JSON types a schema admits, in the order it names them: its type (one
// or a list), its const's, or those of its anyOf/oneOf alternatives.
func schemaTypes(s map[string]any) []string {
	var types []string
	add := func(t string) {
		if t != "" && !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	switch t := s["type"].(type) {
	case string:
		add(t)
	case []any:
		for _, x := range t {
			name, _ := x.(string)
			add(name)
		}
	}
	if c, ok := s["const"]; ok && len(types) == 0 {
		add(jsonType(c))
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		alts, _ := s[key].([]any)
		for _, a := range alts {
			if m, ok := a.(map[string]any); ok {
				for _, t := range schemaTypes(m) {
					add(t)
				}
			}
		}
	}
	return types
}

// jsonType is the JSON Schema type of a decoded JSON value.
func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return ""
}

// comment is YAML comments (the head comment above a key, line comments beside it) as one
// line of Markdown.
func comment(comments ...string) string {
	var words []string
	for _, c := range comments {
		for _, line := range strings.Split(c, "\n") {
			line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
			line = strings.TrimPrefix(line, "-- ")
			if line != "" {
				words = append(words, line)
			}
		}
	}
	return markdown(strings.Join(words, " "))
}

// markdown is one line of text in a table cell: kept inside it, and <placeholders> shown, not
// taken for HTML.
func markdown(s string) string {
	return strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(cell(strings.Join(strings.Fields(s), " ")))
}

// cell is s kept inside a Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

// ChartValuesDoc is ValuesTable of the chart in root.
func ChartValuesDoc(root string) (ValuesDoc, error) {
	values, err := os.ReadFile(filepath.Join(root, ChartPath, "values.yaml"))
	if err != nil {
		return ValuesDoc{}, err
	}
	schema, err := os.ReadFile(filepath.Join(root, ChartPath, "values.schema.json"))
	if err != nil && !os.IsNotExist(err) {
		return ValuesDoc{}, err
	}
	doc, err := ValuesTable(values, schema)
	if err != nil {
		return ValuesDoc{}, fmt.Errorf("%s/values.yaml: %w", ChartPath, err)
	}
	return doc, nil
}

// chartReadme is the chart README in root with its values table generated from values.yaml.
func chartReadme(root string) ([]byte, error) {
	doc, err := ChartValuesDoc(root)
	if err != nil {
		return nil, err
	}
	old, err := os.ReadFile(filepath.Join(root, ChartReadme))
	if err != nil {
		return nil, err
	}
	out, err := docsection.Apply(old, ValuesSection, "make generate: test/helm/cmd/gen-deploy from values.yaml", doc.Table)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ChartReadme, err)
	}
	return out, nil
}

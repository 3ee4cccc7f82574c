package main

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// dashboard is the part of a Grafana dashboard the pictures draw.
type dashboard struct {
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Type            string           `json:"type"`
	Title           string           `json:"title"`
	GridPos         gridPos          `json:"gridPos"`
	Panels          []panel          `json:"panels"`
	Targets         []target         `json:"targets"`
	Options         panelOptions     `json:"options"`
	FieldConfig     fieldConfig      `json:"fieldConfig"`
	Transformations []transformation `json:"transformations"`
}

type gridPos struct {
	X int `json:"x"`
	Y int `json:"y"`
	W int `json:"w"`
	H int `json:"h"`
}

type target struct {
	RefID        string `json:"refId"`
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
}

type panelOptions struct {
	ColorMode string `json:"colorMode"`
	Legend    struct {
		ShowLegend bool     `json:"showLegend"`
		Calcs      []string `json:"calcs"`
	} `json:"legend"`
	SortBy []struct {
		DisplayName string `json:"displayName"`
		Desc        bool   `json:"desc"`
	} `json:"sortBy"`
}

type fieldConfig struct {
	Defaults  fieldDefaults `json:"defaults"`
	Overrides []struct {
		Matcher struct {
			ID      string `json:"id"`
			Options string `json:"options"`
		} `json:"matcher"`
		Properties []struct {
			ID    string          `json:"id"`
			Value json.RawMessage `json:"value"`
		} `json:"properties"`
	} `json:"overrides"`
}

type fieldDefaults struct {
	Unit       string      `json:"unit"`
	Min        *float64    `json:"min"`
	Max        *float64    `json:"max"`
	Thresholds *thresholds `json:"thresholds"`
	Mappings   []struct {
		Type    string `json:"type"`
		Options map[string]struct {
			Text  string `json:"text"`
			Color string `json:"color"`
		} `json:"options"`
	} `json:"mappings"`
	Custom customConfig `json:"custom"`
}

type customConfig struct {
	FillOpacity     *float64   `json:"fillOpacity"`
	Stacking        *stacking  `json:"stacking"`
	LineStyle       *lineStyle `json:"lineStyle"`
	ThresholdsStyle struct {
		Mode string `json:"mode"`
	} `json:"thresholdsStyle"`
	CellOptions struct {
		Type string `json:"type"`
	} `json:"cellOptions"`
}

type stacking struct {
	Mode string `json:"mode"`
}

type lineStyle struct {
	Fill string `json:"fill"` // solid, dash or dot
}

type thresholds struct {
	Steps []struct {
		Value *float64 `json:"value"`
		Color string   `json:"color"`
	} `json:"steps"`
}

type transformation struct {
	ID      string `json:"id"`
	Options struct {
		ExcludeByName map[string]bool   `json:"excludeByName"`
		IndexByName   map[string]int    `json:"indexByName"`
		RenameByName  map[string]string `json:"renameByName"`
	} `json:"options"`
}

// flatten lists panels in document order, each row followed by its panels: the order
// internal/dashboards.Flatten counts the capture's panel indexes in.
func flatten(panels []panel) []panel {
	var out []panel
	for _, p := range panels {
		out = append(out, p)
		out = append(out, flatten(p.Panels)...)
	}
	return out
}

// field is the configuration one series (or table column) is drawn with: the panel's
// defaults with the overrides that match its display name applied, in order.
type field struct {
	Unit        string
	Min, Max    *float64
	Thresholds  *thresholds
	Color       string // a fixed color; "" for the palette's
	FillOpacity float64
	Stacked     bool
	Dash        string // SVG stroke-dasharray; "" for a solid line
	DashedSteps bool   // the thresholds drawn as dashed lines
	CellColored bool   // a table cell's background colored by the thresholds
}

func (p panel) field(name string) (field, error) {
	d := p.FieldConfig.Defaults
	f := field{Unit: d.Unit, Min: d.Min, Max: d.Max, Thresholds: d.Thresholds, FillOpacity: 0}
	applyCustom := func(c customConfig) {
		if c.FillOpacity != nil {
			f.FillOpacity = *c.FillOpacity
		}
		if c.Stacking != nil {
			f.Stacked = c.Stacking.Mode == "normal"
		}
		if c.LineStyle != nil {
			f.Dash = dashArray(c.LineStyle.Fill)
		}
		if c.ThresholdsStyle.Mode == "dashed" {
			f.DashedSteps = true
		}
		if c.CellOptions.Type == "color-background" {
			f.CellColored = true
		}
	}
	applyCustom(d.Custom)
	for _, o := range p.FieldConfig.Overrides {
		var match bool
		switch o.Matcher.ID {
		case "byName":
			match = o.Matcher.Options == name
		case "byRegexp":
			re, err := regexp.Compile("^(?:" + o.Matcher.Options + ")$")
			if err != nil {
				return f, fmt.Errorf("panel %q: override matcher %q: %w", p.Title, o.Matcher.Options, err)
			}
			match = re.MatchString(name)
		default:
			return f, fmt.Errorf("panel %q: override matcher %q not drawn", p.Title, o.Matcher.ID)
		}
		if !match {
			continue
		}
		for _, prop := range o.Properties {
			var err error
			switch prop.ID {
			case "unit":
				err = json.Unmarshal(prop.Value, &f.Unit)
			case "thresholds":
				f.Thresholds = &thresholds{}
				err = json.Unmarshal(prop.Value, f.Thresholds)
			case "color":
				var c struct {
					FixedColor string `json:"fixedColor"`
				}
				err = json.Unmarshal(prop.Value, &c)
				f.Color = c.FixedColor
			case "custom.fillOpacity":
				err = json.Unmarshal(prop.Value, &f.FillOpacity)
			case "custom.stacking":
				var s stacking
				err = json.Unmarshal(prop.Value, &s)
				f.Stacked = s.Mode == "normal"
			case "custom.lineStyle":
				var s lineStyle
				err = json.Unmarshal(prop.Value, &s)
				f.Dash = dashArray(s.Fill)
			case "custom.cellOptions":
				var s struct {
					Type string `json:"type"`
				}
				err = json.Unmarshal(prop.Value, &s)
				f.CellColored = s.Type == "color-background"
			default:
				return f, fmt.Errorf("panel %q: override property %q not drawn", p.Title, prop.ID)
			}
			if err != nil {
				return f, fmt.Errorf("panel %q: override property %q: %w", p.Title, prop.ID, err)
			}
		}
	}
	return f, nil
}

func dashArray(fill string) string {
	switch fill {
	case "dash":
		return "6,4"
	case "dot":
		return "1,3"
	}
	return ""
}

// stepColor is the color of the threshold step v falls in; "" without thresholds.
func (t *thresholds) stepColor(v float64) string {
	if t == nil {
		return ""
	}
	color := ""
	for _, s := range t.Steps {
		if s.Value == nil || v >= *s.Value {
			color = s.Color
		}
	}
	return color
}

// Grafana's named colors, as its default theme draws them.
var namedColors = map[string]string{
	"green": "#73BF69", "red": "#F2495C", "orange": "#FF9830", "yellow": "#FADE2A",
	"blue": "#5794F2", "purple": "#B877D9", "text": "#222222",
}

func colorOf(name string) string {
	if c, ok := namedColors[name]; ok {
		return c
	}
	if strings.HasPrefix(name, "#") {
		return name
	}
	return "#222222"
}

var legendVar = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)

// displayName is a series' name as Grafana's Prometheus data source gives it: the legend
// format with {{label}} replaced, or without one the metric and its labels.
func displayName(legendFormat string, labels map[string]string) string {
	if legendFormat != "" {
		return legendVar.ReplaceAllStringFunc(legendFormat, func(m string) string {
			return labels[legendVar.FindStringSubmatch(m)[1]]
		})
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		if k != "__name__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, labels[k])
	}
	if len(parts) == 0 {
		if n := labels["__name__"]; n != "" {
			return n
		}
		return "Value"
	}
	return labels["__name__"] + "{" + strings.Join(parts, ", ") + "}"
}

// mapped is a stat value's text through the panel's value mappings, with the mapping's color.
func (p panel) mapped(v float64) (text, color string, ok bool) {
	key := fmt.Sprint(v)
	if v != math.Trunc(v) {
		return "", "", false
	}
	for _, m := range p.FieldConfig.Defaults.Mappings {
		if m.Type != "value" {
			continue
		}
		if o, found := m.Options[key]; found {
			return o.Text, o.Color, true
		}
	}
	return "", "", false
}

// substituteVars replaces the dashboard variables in a title with the capture's values.
func substituteVars(s string, vars map[string]string) string {
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	// Longest first, so that $pod_name would not be cut at $pod.
	slices.SortFunc(keys, func(a, b string) int { return len(b) - len(a) })
	for _, k := range keys {
		s = strings.ReplaceAll(s, "${"+k+"}", vars[k])
		s = strings.ReplaceAll(s, "$"+k, vars[k])
	}
	return s
}

package exporter

import "github.com/prometheus/client_golang/prometheus"

// familyOf names the family of each of the exporter's Descs, so that a scrape builds no series
// of a family its filter would drop (Config.Publishes): at the defaults most per-volume series
// are opt-in, and building them to drop them was most of a scrape's cost.
var familyOf = map[*prometheus.Desc]string{}

// newDesc is prometheus.NewDesc for the exporter's families, recorded in familyOf.
func newDesc(name, help string, labels []string, constLabels prometheus.Labels) *prometheus.Desc {
	d := prometheus.NewDesc(name, help, labels, constLabels)
	familyOf[d] = name
	return d
}

// hiddenFamilies is the set of the exporter's Descs whose family publishes rejects.
func hiddenFamilies(publishes func(family string) bool) map[*prometheus.Desc]bool {
	hidden := map[*prometheus.Desc]bool{}
	if publishes == nil {
		return hidden
	}
	for d, name := range familyOf {
		if !publishes(name) {
			hidden[d] = true
		}
	}
	return hidden
}

// Package kubename checks the names emptyDir guard takes from where the API server did not
// check them: an ownerReference's kind and name (the exporter's emptydir_pod_workload_info),
// and the labels the plugin reads back from a Prometheus others write to. A name that passes
// holds only ASCII letters, digits, '-' and '.', and may go into a table or a shell command.
package kubename

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// IsKind reports whether s can be a kind: the API server's check of a
// CustomResourceDefinition's kind (its lower case a DNS-1035 label), ASCII only, as
// strings.ToLower turns the Kelvin sign into a "k".
func IsKind(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return len(validation.IsDNS1035Label(strings.ToLower(s))) == 0
}

// IsObjectName reports whether s can name a workload (a DNS-1123 subdomain).
func IsObjectName(s string) bool { return len(validation.IsDNS1123Subdomain(s)) == 0 }

// IsNamespace reports whether s can name a namespace (a DNS-1123 label).
func IsNamespace(s string) bool { return len(validation.IsDNS1123Label(s)) == 0 }

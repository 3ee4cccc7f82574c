package main

import (
	"slices"
	"testing"
)

func TestRaises(t *testing.T) {
	product := map[string]string{
		"golang.org/x/net":           "v0.62.0",
		"google.golang.org/protobuf": "v1.36.12",
		"k8s.io/client-go":           "v0.37.2",
		"github.com/godbus/dbus/v5":  "v5.1.0",
		"only.in/product":            "v1.0.0",
	}
	tool := map[string]string{
		"golang.org/x/net": "v0.57.0", // behind: raised
		// A pre-release of the same version is older (semver, not string order): raised.
		"google.golang.org/protobuf": "v1.36.12-0.20260120151049-f2248ac996af",
		"k8s.io/client-go":           "v0.32.3", // behind, but under a kept prefix
		"github.com/godbus/dbus/v5":  "v5.2.2",  // newer in the tool: kept
		"only.in/tool":               "v1.0.0",
	}
	got := raises(product, tool, []string{"k8s.io/"})
	want := []string{"golang.org/x/net@v0.62.0", "google.golang.org/protobuf@v1.36.12"}
	if !slices.Equal(got, want) {
		t.Errorf("raises = %q, want %q", got, want)
	}
	if got := raises(product, tool, nil); !slices.Contains(got, "k8s.io/client-go@v0.37.2") {
		t.Errorf("without kept prefixes, raises = %q, want k8s.io/client-go@v0.37.2 among them", got)
	}
}

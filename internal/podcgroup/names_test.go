package podcgroup

import (
	"strings"
	"testing"
)

// TestLayoutPath: the directories the kubelet v1.37 makes for a pod, by driver, QoS class and
// --cgroup-root (the systemd example is CgroupName.ToSystemd's own, cgroup_manager_linux.go).
func TestLayoutPath(t *testing.T) {
	const uid = "1234-abcd-5678-efgh"
	for _, tc := range []struct {
		root, qos string
		driver    Driver
		want      string
	}{
		{"/", QOSBurstable, DriverCgroupfs, "/kubepods/burstable/pod1234-abcd-5678-efgh"},
		{"/", QOSBestEffort, DriverCgroupfs, "/kubepods/besteffort/pod1234-abcd-5678-efgh"},
		{"/", QOSGuaranteed, DriverCgroupfs, "/kubepods/pod1234-abcd-5678-efgh"},
		{"/", QOSBurstable, DriverSystemd, "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd_5678_efgh.slice"},
		{"/", QOSBestEffort, DriverSystemd, "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1234_abcd_5678_efgh.slice"},
		{"/", QOSGuaranteed, DriverSystemd, "/kubepods.slice/kubepods-pod1234_abcd_5678_efgh.slice"},
		{"/node-a/pods", QOSBurstable, DriverCgroupfs, "/node-a/pods/kubepods/burstable/pod1234-abcd-5678-efgh"},
		{"/node-a", QOSGuaranteed, DriverSystemd, "/node_a.slice/node_a-kubepods.slice/node_a-kubepods-pod1234_abcd_5678_efgh.slice"},
	} {
		root, err := parseRoot(tc.root)
		if err != nil {
			t.Fatal(err)
		}
		name, err := podCgroupName(root, tc.qos, uid)
		if err != nil {
			t.Fatal(err)
		}
		if got := layoutPath(tc.driver, name); got != tc.want {
			t.Errorf("root %s, %s, %s: %s, want %s", tc.root, tc.qos, tc.driver, got, tc.want)
		}
	}
}

// TestPodCgroupNameRefuses: nothing that could leave the QoS cgroup names a pod's cgroup.
func TestPodCgroupNameRefuses(t *testing.T) {
	for _, uid := range []string{"", "..", "../x", "a/b", "a_b", "a.slice", strings.Repeat("a", 129)} {
		if _, err := podCgroupName(nil, QOSBurstable, uid); err == nil {
			t.Errorf("UID %q accepted", uid)
		}
	}
	if _, err := podCgroupName(nil, "burstable", "uid"); err == nil {
		t.Error(`QoS class "burstable" (not the API's spelling) accepted`)
	}
	for _, root := range []string{"", "kubepods", "/a//b", "/a/../b", "/a_b"} {
		if _, err := parseRoot(root); err == nil {
			t.Errorf("cgroup root %q accepted", root)
		}
	}
}

package mountinfo

import (
	"slices"
	"strings"
	"testing"
)

func TestUnescape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/var/lib/kubelet", "/var/lib/kubelet"},
		{`/mnt/with\040space`, "/mnt/with space"},
		{`/a\011tab\012nl\134bs`, "/a\ttab\nnl\\bs"},
		{`/trailing\04`, `/trailing\04`}, // too short to be an escape
		{`/not\08x`, `/not\08x`},         // 8 is no octal digit
		{`\040`, " "},
	} {
		if got := Unescape(tc.in); got != tc.want {
			t.Errorf("Unescape(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	table := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
36 22 0:31 / /run/containerd/io.containerd.runtime.v2.task/k8s.io/abc/rootfs rw,relatime shared:7 master:3 - overlay overlay rw,lowerdir=/l1:/l2,upperdir=/var/lib/containerd/snapshots/12/fs,workdir=/w
37 22 8:1 /var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/a\040b /data rw - ext4 /dev/sda1 rw
not a mount line
38 22 0:5 / /short rw - tmpfs
`
	got, err := Parse(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{
		{Device: "8:1", Root: "/", Point: "/", FSType: "ext4"},
		{Device: "0:31", Root: "/", Point: "/run/containerd/io.containerd.runtime.v2.task/k8s.io/abc/rootfs", FSType: "overlay", Upper: "/var/lib/containerd/snapshots/12/fs"},
		{Device: "8:1", Root: "/var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/a b", Point: "/data", FSType: "ext4"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Parse:\n got %+v\nwant %+v", got, want)
	}
}

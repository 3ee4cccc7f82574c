package podcgroup

import "testing"

// TestMountinfoSuperOptions: the super options are found by device and type, whatever the
// optional fields between, and a device without a line is an error, not a guess.
func TestMountinfoSuperOptions(t *testing.T) {
	const info = `22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro
36 22 7:3 / /mnt/j rw,relatime shared:40 master:2 - ext4 /dev/loop3 rw,data=journal
37 22 7:3 /sub /mnt/sub\040dir rw - ext4 /dev/loop3 rw,data=journal
38 22 7:4 / /mnt/x rw - xfs /dev/loop4 rw,attr2,inode64
`
	for _, tc := range []struct {
		major, minor uint32
		fstype, want string
	}{{259, 2, "ext4", "rw,errors=remount-ro"}, {7, 3, "ext4", "rw,data=journal"}, {7, 4, "xfs", "rw,attr2,inode64"}} {
		got, err := mountinfoSuperOptions([]byte(info), tc.major, tc.minor, tc.fstype)
		if err != nil || got != tc.want {
			t.Errorf("%d:%d %s: %q, %v; want %q", tc.major, tc.minor, tc.fstype, got, err, tc.want)
		}
	}
	if got, err := mountinfoSuperOptions([]byte(info), 7, 4, "ext4"); err == nil {
		t.Errorf("7:4 as ext4: %q, want an error", got)
	}
}

package podcgroup

import (
	"os"
	"strings"
	"testing"
)

// readFields reads the values of keys from the flat keyed file, as Read reads its own, failing
// the test on an error or a missing key.
func readFields(t *testing.T, file string, keys ...string) []uint64 {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint64, len(keys))
	fields := make([]keyedField, len(keys))
	for i, k := range keys {
		fields[i] = keyedField{k, &out[i]}
	}
	if err := scanKeyed(b, file, fields); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestScanKeyed(t *testing.T) {
	const stat = "file 4096\nfile_dirty 12288\nshmem 0\nfile_writeback 8192\nfile_mapped 77\n"
	for _, tc := range []struct {
		name, in string
		want     [3]uint64 // file, file_dirty, file_writeback
		err      string
	}{
		{"each key by its whole name, not a prefix", stat, [3]uint64{4096, 12288, 8192}, ""},
		{"a key missing", "file 1\nfile_dirty 2\n", [3]uint64{}, "has no file_writeback"},
		{"a value no number", "file x\nfile_dirty 2\nfile_writeback 3\n", [3]uint64{}, "file: strconv.ParseUint"},
		{"a line without a value", "file\n", [3]uint64{}, "is no key and value"},
		{"no newline at the end", "file_writeback 3\nfile_dirty 2\nfile 1", [3]uint64{1, 2, 3}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [3]uint64
			err := scanKeyed([]byte(tc.in), "memory.stat", []keyedField{{"file", &got[0]}, {"file_dirty", &got[1]}, {"file_writeback", &got[2]}})
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			case tc.err == "" && got != tc.want:
				t.Errorf("read %v, want %v", got, tc.want)
			}
		})
	}
}

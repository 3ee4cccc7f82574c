// Package walk benchmarks emptyDir guard's walk (fswalk.MeasureDiskUsage) against GNU du and
// the kubelet's fs.DiskUsage on generated trees of several shapes and sizes, each measurement in
// a process of its own so that CPU time and peak RSS are the walk's alone.
package walk

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// treeVersion changes whenever a shape's generator does, so that cached trees of an older
// layout are rebuilt rather than measured under a new name.
const treeVersion = "1"

// Shape is a kind of tree, generated to about a given number of entries.
type Shape struct {
	Name string
	// Doc says what the shape exercises, for the report.
	Doc   string
	build func(root string, entries int) error
}

// Shapes are the trees of the benchmark, in report order.
var Shapes = []Shape{
	{"flat", "one directory holding every file", buildFlat},
	{"deep", "chains of 256 nested directories, 3 files at each level (deeper than the walk keeps fds open)", buildDeep},
	{"small-directories", "directories of 4 files, 100 such directories per parent", buildSmallDirectories},
	{"hard-links", "directories of 1000 names; 1 inode in 9 has a second name in the next directory", buildHardLinks},
	{"sparse", "directories of 1000 files of 1 MiB apparent size, 1 in 4 with one 4 KiB block written", buildSparse},
}

// ShapeNamed returns the shape called name.
func ShapeNamed(name string) (Shape, error) {
	for _, s := range Shapes {
		if s.Name == name {
			return s, nil
		}
	}
	return Shape{}, fmt.Errorf("unknown tree shape %q", name)
}

// Ensure returns the root of the tree of shape with about entries entries below cacheDir,
// generating it unless a complete one of the same version is there already. Generating a
// million entries takes minutes, so trees are kept between runs.
func Ensure(cacheDir string, shape Shape, entries int) (string, error) {
	name := fmt.Sprintf("%s-%d", shape.Name, entries)
	root := filepath.Join(cacheDir, name)
	// The marker sits beside the tree, not in it, so that it is not measured.
	marker := filepath.Join(cacheDir, name+".complete")
	if v, err := os.ReadFile(marker); err == nil && string(v) == treeVersion {
		return root, nil
	}
	if err := os.RemoveAll(root); err != nil {
		return "", fmt.Errorf("removing incomplete tree: %w", err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	if err := shape.build(root, entries); err != nil {
		return "", fmt.Errorf("generating %s: %w", name, err)
	}
	unix.Sync() // cold-cache runs must not pay for writing back the generation
	if err := os.WriteFile(marker, []byte(treeVersion), 0o644); err != nil {
		return "", err
	}
	return root, nil
}

// fileSize gives 1 file in 4 some data (1 to 3 blocks of 4 KiB) and the rest none, so that a
// million entries fit in about a gigabyte while bytes still differ from inodes.
func fileSize(i int) int {
	if i%4 != 0 {
		return 0
	}
	return 1 + (i*37)%12000
}

var zeros = make([]byte, 12000)

func writeFile(path string, size int) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return &os.PathError{Op: "create", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if size > 0 {
		if _, err := unix.Write(fd, zeros[:size]); err != nil {
			return &os.PathError{Op: "write", Path: path, Err: err}
		}
	}
	return nil
}

func buildFlat(root string, entries int) error {
	for i := range entries {
		if err := writeFile(filepath.Join(root, "f"+strconv.Itoa(i)), fileSize(i)); err != nil {
			return err
		}
	}
	return nil
}

func buildDeep(root string, entries int) error {
	const depth, filesPerLevel = 256, 3
	chains := max(1, entries/(depth*(filesPerLevel+1)))
	n := 0
	for c := range chains {
		dir := filepath.Join(root, "c"+strconv.Itoa(c))
		for range depth {
			if err := mkdirWithFiles(dir, filesPerLevel, n); err != nil {
				return err
			}
			n += filesPerLevel
			dir = filepath.Join(dir, "d")
		}
	}
	return nil
}

// mkdirWithFiles creates dir holding files f0, f1, ... of the sizes fileSize gives the
// tree's n-th, n+1-th, ... file.
func mkdirWithFiles(dir string, files, n int) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	for f := range files {
		if err := writeFile(filepath.Join(dir, "f"+strconv.Itoa(f)), fileSize(n+f)); err != nil {
			return err
		}
	}
	return nil
}

func buildSmallDirectories(root string, entries int) error {
	const files, perParent = 4, 100
	directories := max(1, entries/(files+1))
	n := 0
	for d := range directories {
		parent := filepath.Join(root, "p"+strconv.Itoa(d/perParent))
		if d%perParent == 0 {
			if err := os.Mkdir(parent, 0o755); err != nil {
				return err
			}
		}
		if err := mkdirWithFiles(filepath.Join(parent, "d"+strconv.Itoa(d%perParent)), files, n); err != nil {
			return err
		}
		n += files
	}
	return nil
}

func buildHardLinks(root string, entries int) error {
	const perDirectory, linkEvery = 1000, 9
	directories := max(1, entries/perDirectory)
	n := 0
	for d := range directories {
		if err := os.Mkdir(filepath.Join(root, "d"+strconv.Itoa(d)), 0o755); err != nil {
			return err
		}
	}
	// 900 files per directory, 100 of them linked from the next directory: 1000 names.
	for d := range directories {
		dir := filepath.Join(root, "d"+strconv.Itoa(d))
		next := filepath.Join(root, "d"+strconv.Itoa((d+1)%directories))
		for f := range perDirectory * linkEvery / (linkEvery + 1) {
			p := filepath.Join(dir, "f"+strconv.Itoa(f))
			if err := writeFile(p, fileSize(n)); err != nil {
				return err
			}
			n++
			if f%linkEvery == 0 {
				if err := os.Link(p, filepath.Join(next, "l"+strconv.Itoa(d)+"-"+strconv.Itoa(f))); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func buildSparse(root string, entries int) error {
	const perDirectory, apparent, block = 1000, 1 << 20, 4096
	for i := range entries {
		dir := filepath.Join(root, "d"+strconv.Itoa(i/perDirectory))
		if i%perDirectory == 0 {
			if err := os.Mkdir(dir, 0o755); err != nil {
				return err
			}
		}
		f, err := os.Create(filepath.Join(dir, "s"+strconv.Itoa(i)))
		if err != nil {
			return err
		}
		err = f.Truncate(apparent)
		if err == nil && i%4 == 0 {
			_, err = f.WriteAt(zeros[:block], int64(i%(apparent/block))*block)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// DropCaches writes back dirty pages and empties the page, dentry and inode caches, so that
// the next walk reads every directory and inode from disk. It needs root.
func DropCaches() error {
	unix.Sync()
	err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200)
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("dropping the page cache needs root: %w", err)
	}
	return err
}

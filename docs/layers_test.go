package docs

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is the import path of the repository's module.
const module = "github.com/magnetar-io/magnetar"

// TestLayersNeverPointUp: the Layers diagram of ARCHITECTURE.md is the
// order of the floors, highest first (names on one line share a floor),
// and internal/ is the ground floor under all of them: what every layer
// may import, so it imports no layer itself. No package imports one on a
// higher floor; a package of this module outside every floor is an error
// too, so a new directory gets a place in the diagram.
func TestLayersNeverPointUp(t *testing.T) {
	root := repoRoot(t)
	floors := layerFloors(t)
	ground := len(floors) // internal/: below every diagram line
	floorOf := func(rel string) (int, bool) {
		if rel == "internal" || strings.HasPrefix(rel, "internal/") {
			return ground, true
		}
		best, floor := "", -1
		for dir, f := range floors {
			if (rel == dir || strings.HasPrefix(rel, dir+"/")) && len(dir) > len(best) {
				best, floor = dir, f
			}
		}
		return floor, floor >= 0
	}
	for _, rel := range packageDirs(t, root) {
		if rel == "docs" {
			continue // this test
		}
		own, ok := floorOf(rel)
		if !ok {
			t.Errorf("%s/ is on no floor of ARCHITECTURE.md's Layers diagram", rel)
			continue
		}
		pkg, err := build.ImportDir(filepath.Join(root, rel), 0)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		for _, imp := range pkg.Imports { // not test imports: tests may reach up to drive a layer
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			if f, known := floorOf(dep); known && f < own {
				t.Errorf("%s imports %s, a higher floor (ARCHITECTURE.md, Layers)", rel, dep)
			}
		}
	}
}

// layerFloors maps each directory of the Layers diagram (without its
// trailing '/') to its line's index: 0 is the top floor.
func layerFloors(t *testing.T) map[string]int {
	t.Helper()
	lines := layerLines(t)
	floors := map[string]int{}
	for i, names := range lines {
		for _, n := range names {
			floors[strings.TrimSuffix(n, "/")] = i
		}
	}
	return floors
}

// packageDirs are the directories under root holding non-test Go files,
// relative to root, skipping what the go tool skips.
func packageDirs(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || name == "vendor" || name == "bin" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			if rel = filepath.ToSlash(rel); !slices.Contains(dirs, rel) {
				dirs = append(dirs, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// Package docs holds no code: its test keeps ARCHITECTURE.md true to the
// tree.
package docs

import (
	"bufio"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The rule, as ARCHITECTURE.md states it above its file map:
//
//   - In the first column of each file-map row, a backticked token with a
//     '/' is a path from the repository root; one without a '/' is in the
//     directory of the path before it in the same cell. A path ending in
//     '/' is a directory. '*' globs must match at least one file.
//   - Backticked `.go` and `.md` paths with a '/' in the second column must
//     exist too.
//   - Every directory in the Layers diagram (the first field or fields of
//     each line, up to the description) must exist.
//   - Every directory holding non-test .go files (skipping testdata, bin,
//     vendor and names starting with '.' or '_', as the go tool does) must
//     be named in a first column, as the directory itself (`ledger/`) or by
//     a file or glob in it (`ledger/client.go`). A directory's entry covers
//     only that directory, never its sub-packages.

var backticked = regexp.MustCompile("`([^`]+)`")

// repoRoot is the directory holding go.mod, above this one.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod in %s: %v", dir, err)
	}
	return dir
}

// architecture reads ARCHITECTURE.md's Layers diagram directories and the
// file map's rows (first and second cells).
func architecture(t *testing.T) (layers []string, rows [][2]string) {
	lines, rows := architectureLines(t)
	for _, l := range lines {
		layers = append(layers, l...)
	}
	return layers, rows
}

// layerLines are the Layers diagram's directories, line by line (a floor
// each, highest first).
func layerLines(t *testing.T) [][]string {
	lines, _ := architectureLines(t)
	return lines
}

// architectureLines is architecture with the diagram's directories kept
// by line.
func architectureLines(t *testing.T) (layers [][]string, rows [][2]string) {
	t.Helper()
	f, err := os.Open("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	section, inBlock := "", false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			section, inBlock = strings.TrimPrefix(line, "## "), false
			continue
		}
		switch {
		case section == "Layers" && strings.HasPrefix(line, "```"):
			inBlock = !inBlock
		case section == "Layers" && inBlock:
			// "bookie/ entrylog/     storage node: ...": the names end
			// at the first run of two or more spaces.
			names, _, _ := strings.Cut(strings.TrimSpace(line), "  ")
			layers = append(layers, strings.Fields(names))
		case strings.HasPrefix(section, "File map") && strings.HasPrefix(line, "| `"):
			cells := strings.Split(line, " | ")
			if len(cells) < 2 {
				t.Fatalf("file map row without two cells: %q", line)
			}
			rows = append(rows, [2]string{strings.TrimPrefix(cells[0], "| "), strings.Join(cells[1:], " | ")})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(layers) == 0 || len(rows) == 0 {
		t.Fatalf("found %d layer directories and %d file map rows: has ARCHITECTURE.md's layout changed?", len(layers), len(rows))
	}
	return layers, rows
}

// mapPaths resolves the first cells' tokens to slash paths from the root.
func mapPaths(t *testing.T, rows [][2]string) []string {
	t.Helper()
	var paths []string
	for _, row := range rows {
		dir := ""
		for _, m := range backticked.FindAllStringSubmatch(row[0], -1) {
			p := m[1]
			if !strings.Contains(p, "/") {
				if dir == "" {
					t.Errorf("file map: %q has no directory before it in %q", p, row[0])
					continue
				}
				p = dir + "/" + p
			}
			if strings.HasSuffix(p, "/") {
				dir = strings.TrimSuffix(p, "/")
			} else {
				dir = path.Dir(p)
			}
			paths = append(paths, p)
		}
	}
	return paths
}

var docPath = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.*-]+)+\.(go|md)$`)

func TestArchitectureMapExists(t *testing.T) {
	root := repoRoot(t)
	layers, rows := architecture(t)
	for _, d := range layers {
		if st, err := os.Stat(filepath.Join(root, filepath.FromSlash(d))); err != nil || !st.IsDir() {
			t.Errorf("Layers diagram names %q, which is not a directory in the tree", d)
		}
	}
	check := func(where, p string) {
		matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(p, "/"))))
		if err != nil {
			t.Errorf("%s: bad pattern %q: %v", where, p, err)
			return
		}
		if len(matches) == 0 {
			t.Errorf("%s names %q, which does not exist", where, p)
			return
		}
		if strings.HasSuffix(p, "/") {
			if st, err := os.Stat(matches[0]); err != nil || !st.IsDir() {
				t.Errorf("%s names %q as a directory; it is not one", where, p)
			}
		}
	}
	for _, p := range mapPaths(t, rows) {
		check("file map", p)
	}
	for _, row := range rows {
		for _, m := range backticked.FindAllStringSubmatch(row[1], -1) {
			if docPath.MatchString(m[1]) {
				check("file map (second column)", m[1])
			}
		}
	}
}

func TestArchitectureMapCoversPackages(t *testing.T) {
	root := repoRoot(t)
	_, rows := architecture(t)
	covered := map[string]bool{}
	for _, p := range mapPaths(t, rows) {
		if strings.HasSuffix(p, "/") {
			covered[strings.TrimSuffix(p, "/")] = true
		} else {
			covered[path.Dir(p)] = true
		}
	}
	var missing []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") ||
				strings.HasPrefix(name, "_") || rel == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		if dir := path.Dir(rel); !covered[dir] {
			covered[dir] = true // report once
			missing = append(missing, dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(missing)
	for _, dir := range missing {
		t.Errorf("package %s/ is not in ARCHITECTURE.md's file map: add a row `%s/` saying what it is for", dir, dir)
	}
}

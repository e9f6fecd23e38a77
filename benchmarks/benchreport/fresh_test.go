package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestInEmptyDir: the directory is emptied before fn and removed after,
// also when fn fails.
func TestInEmptyDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "old"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := inEmptyDir(dir, func() error {
		if _, err := os.Stat(filepath.Join(dir, "old")); !os.IsNotExist(err) {
			t.Errorf("an earlier run's file is still there: %v", err)
		}
		return errors.Join(os.MkdirAll(dir, 0o755), os.WriteFile(filepath.Join(dir, "new"), nil, 0o644), boom)
	})
	if !errors.Is(err, boom) {
		t.Errorf("error %v, want fn's", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s left behind: %v", dir, err)
	}
}

// TestSectionsOwnTheirDirs: every section's data is removed when it ends,
// and no two sections share a directory.
func TestSectionsOwnTheirDirs(t *testing.T) {
	r := &runner{res: &Results{}}
	var names, dirs []string
	for _, s := range r.sections() {
		names = append(names, s.name)
		if len(s.dirs) == 0 {
			t.Errorf("section %s removes no data", s.name)
		}
		for _, d := range s.dirs {
			if slices.Contains(dirs, d) {
				t.Errorf("%s is two sections' directory", d)
			}
			dirs = append(dirs, d)
		}
	}
	if !slices.Equal(names, sectionNames) {
		t.Errorf("sections %v, want %v", names, sectionNames)
	}
}

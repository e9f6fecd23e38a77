package engine

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
)

// WriteFileAtomic replaces name with data so that after a crash the file
// holds either its old contents or the new ones, never a mix: the data goes
// to a temporary file that is synced, renamed over name, and the directory
// is synced. Small state files (bookie cookies, instance ids) use it.
func WriteFileAtomic(fs FS, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.WriteAtSync([][]byte{data}, 0); err != nil {
		return errors.Join(err, f.Close(), fs.Remove(tmp))
	}
	if err := f.Close(); err != nil {
		return errors.Join(err, fs.Remove(tmp))
	}
	if err := fs.Rename(tmp, name); err != nil {
		return errors.Join(err, fs.Remove(tmp))
	}
	return fs.SyncDir(filepath.Dir(name))
}

// ReadFile reads a whole file.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data := make([]byte, f.Size())
	n, err := f.ReadAt(data, 0)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(data)) {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, nil
}

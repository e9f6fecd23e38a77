package offload

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestKnownDriver(t *testing.T) {
	known := []string{"S3", "s3", "aws-s3", "AWS-S3", "google-cloud-storage", "filesystem", "FileSystem", "azureblob", "aliyun-oss"}
	for _, name := range known {
		if !KnownDriver(name) {
			t.Errorf("KnownDriver(%q) = false", name)
		}
	}
	for _, name := range []string{"", "memory", "hdfs", "gcs", "transparent-proxy", "s3 ", "aws"} {
		if KnownDriver(name) {
			t.Errorf("KnownDriver(%q) = true", name)
		}
	}
}

func TestNewUnsupportedDrivers(t *testing.T) {
	for _, name := range []string{"aws-s3", "S3", "s3", "google-cloud-storage", "gcs", "azureblob", "aliyun-oss", "transparent-proxy"} {
		_, err := New(name, Config{Root: t.TempDir()})
		if !errors.Is(err, ErrUnsupportedDriver) {
			t.Errorf("New(%q): %v, want ErrUnsupportedDriver", name, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, `"`+name+`"`) || !strings.Contains(msg, `"filesystem"`) {
			t.Errorf("New(%q): %q does not name the driver and what this build offers", name, msg)
		}
	}
}

func TestNewUnknownDriver(t *testing.T) {
	for _, name := range []string{"hdfs", "", "s4"} {
		_, err := New(name, Config{Root: t.TempDir()})
		if err == nil || errors.Is(err, ErrUnsupportedDriver) {
			t.Fatalf("New(%q): %v, want an unknown-driver error", name, err)
		}
		if name == "" {
			continue
		}
		for _, want := range append([]string{name}, pulsarDrivers...) {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("New(%q): %q does not mention %q", name, err, want)
			}
		}
	}
}

func TestNewFilesystemRoots(t *testing.T) {
	dir := t.TempDir()
	good := map[string]string{
		dir:                          dir,
		"file://" + dir:              dir,
		"file://localhost" + dir:     dir,
		"file:" + dir:                dir,
		"file://" + dir + "/sub/../": dir,
	}
	for root, want := range good {
		o, err := New("FileSystem", Config{Root: root})
		if err != nil {
			t.Fatalf("root %q: %v", root, err)
		}
		if got := o.(*fsOffloader).root; got != want || o.Driver() != DriverFilesystem {
			t.Errorf("root %q: %q driver %q, want %q", root, got, o.Driver(), want)
		}
	}
	for _, root := range []string{"", "hdfs://namenode:8020/pulsar", "file://otherhost/x", "file:relative", "s3://bucket"} {
		if _, err := New(DriverFilesystem, Config{Root: root}); err == nil {
			t.Errorf("root %q accepted", root)
		}
	}
}

// TestNewFilesystemOnDisk: the default file system is the real one, and
// the managed ledger's '/' become directories.
func TestNewFilesystemOnDisk(t *testing.T) {
	dir := t.TempDir()
	o, err := New(DriverFilesystem, Config{Root: "file://" + dir})
	if err != nil {
		t.Fatal(err)
	}
	k := testKey(77)
	if err := o.Offload(context.Background(), k, nil, newSource(77, [][]byte{[]byte("disk")})); err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "public", "default", "persistent", "t1", "77-*.ledger"))
	if len(matches) != 1 {
		t.Fatalf("copy files %v", matches)
	}
	if o, err := New("memory", Config{}); err != nil || o.Driver() != DriverMemory {
		t.Fatalf("memory driver: %v", err)
	}
}

package metadata

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseTarget(t *testing.T) {
	good := map[string]Target{
		"memory:":                      {Scheme: "memory"},
		"local:/var/lib/magnetar/meta": {Scheme: "local", Dir: "/var/lib/magnetar/meta"},
		"zk:a:2181,b:2182/pulsar":      {Scheme: "zk", Hosts: []string{"a:2181", "b:2182"}, Chroot: "/pulsar"},
		"zk:127.0.0.1:2181":            {Scheme: "zk", Hosts: []string{"127.0.0.1:2181"}},
		"zk://[::1]:2181/x/y":          {Scheme: "zk", Hosts: []string{"[::1]:2181"}, Chroot: "/x/y"},
		"etcd:http://h1:2379,h2:2379/magnetar": {Scheme: "etcd", Hosts: []string{"http://h1:2379", "http://h2:2379"},
			Chroot: "/magnetar"},
		"etcd:h1:2379": {Scheme: "etcd", Hosts: []string{"http://h1:2379"}},
		"etcd:https://h1:2379,h2:2379/p?cacert=/ca.pem&cert=/c.pem&key=/k.pem&user=u&password-file=/pw": {
			Scheme: "etcd", Hosts: []string{"https://h1:2379", "https://h2:2379"}, Chroot: "/p",
			Params: map[string]string{"cacert": "/ca.pem", "cert": "/c.pem", "key": "/k.pem", "user": "u", "password-file": "/pw"}},
		"etcd:h1:2379?cacert=/ca.pem": {Scheme: "etcd", Hosts: []string{"https://h1:2379"}, Params: map[string]string{"cacert": "/ca.pem"}},
	}
	for in, want := range good {
		got, err := ParseTarget(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "zookeeper:a:1", "zk:", "zk:host", "zk:a:0", "zk:a:2181/", "zk:a:99999",
		"local:relative/dir", "memory:x", "zk:a:2181//x",
		"etcd:", "etcd:http://h1", "etcd:ftp://h1:2379", "etcd:http://h1:2379/p,h2:2379", "etcd:h1:2379/",
		"etcd:h1:2379?bogus=1", "etcd:h1:2379?user=a&user=b", "etcd:http://u:p@h1:2379"} {
		_, err := ParseTarget(bad)
		if err == nil || !strings.Contains(err.Error(), `want "memory:"`) {
			t.Errorf("%q: error %v does not name the expected forms", bad, err)
		}
	}
}

func TestValidatePath(t *testing.T) {
	for _, ok := range []string{"/", "/a", "/a/b-c_d.e", "/ledgers/00/0000/L0001"} {
		if err := ValidatePath(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a", "/a/", "//a", "/a//b", "/a/./b", "/a/../b", "/a\x00b", "/a\nb"} {
		if err := ValidatePath(bad); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("%q accepted: %v", bad, err)
		}
	}
}

func TestOpenMemory(t *testing.T) {
	s, err := Open(context.Background(), "memory:", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Put(context.Background(), "/a/b", []byte("v"), AnyVersion); err != nil {
		t.Fatal(err)
	}
}

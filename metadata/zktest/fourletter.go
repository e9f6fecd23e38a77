package zktest

import (
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// Serving reports whether the server at hostport serves reads and writes
// (ZooKeeper's "isro" four-letter word answers "rw").
func Serving(hostport string) (bool, error) {
	out, err := FourLetter(hostport, "isro")
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(out) == "rw", nil
}

// FourLetter sends a ZooKeeper four-letter command and returns the reply.
func FourLetter(hostport, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", hostport, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", fmt.Errorf("zktest: %s to %s: %w", cmd, hostport, err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return "", fmt.Errorf("zktest: %s from %s: %w", cmd, hostport, err)
	}
	return string(b), nil
}

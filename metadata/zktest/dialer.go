package zktest

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// Dialer is a dialer whose connections a test can cut, to expire a
// ZooKeeper session or simulate a partition between one client and the
// servers. Use Dial as ZKOptions.Dial.
type Dialer struct {
	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

// Dial connects unless the dialer is cut.
func (d *Dialer) Dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		return nil, fmt.Errorf("dial %s: test partition", addr)
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

// Cut closes every connection and refuses new ones until Heal.
func (d *Dialer) Cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = true
	for _, c := range d.conns {
		c.Close()
	}
	d.conns = nil
}

// Heal lets connections through again.
func (d *Dialer) Heal() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = false
}

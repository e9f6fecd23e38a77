package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/magnetar-io/magnetar/internal/netlab"
)

// Proc is one server process of the cluster, in its host's namespace. It
// can be started again after a kill with the same arguments (and data).
// Its output is appended to Dir/<Name>.log across restarts.
type Proc struct {
	Name  string
	Host  *netlab.Host
	Prog  string
	Args  []string
	Env   []string
	Log   string
	Ready func(p *Proc) bool // serving; nil: "ready" in the log since the start

	mu struct {
		sync.Mutex
		cmd    *exec.Cmd
		exited chan struct{}
		err    error
		from   int64 // log offset at the last start
		paused bool
	}
}

// Start starts the process if it is not running.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runningLocked() {
		return nil
	}
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	st, _ := f.Stat()
	fmt.Fprintf(f, "\n==== chaos: start %s %s\n", p.Name, time.Now().Format(time.RFC3339Nano))
	cmd := p.Host.Command(p.Prog, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	exited := make(chan struct{})
	p.mu.cmd, p.mu.exited, p.mu.err, p.mu.from, p.mu.paused = cmd, exited, nil, st.Size(), false
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.mu.err = err
		p.mu.Unlock()
		close(exited)
	}()
	return nil
}

func (p *Proc) runningLocked() bool {
	if p.mu.exited == nil {
		return false
	}
	select {
	case <-p.mu.exited:
		return false
	default:
		return true
	}
}

// Running reports whether the process is alive (paused counts).
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

// Paused reports whether the process is stopped with SIGSTOP.
func (p *Proc) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.paused && p.runningLocked()
}

func (p *Proc) signal(sig syscall.Signal) (chan struct{}, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		return nil, fmt.Errorf("%s is not running", p.Name)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.mu.paused = true
	case syscall.SIGCONT, syscall.SIGKILL:
		p.mu.paused = false
	}
	return p.mu.exited, p.mu.cmd.Process.Signal(sig)
}

// Kill sends SIGKILL and waits until the process is reaped.
func (p *Proc) Kill() {
	if exited, err := p.signal(syscall.SIGKILL); err == nil {
		<-exited
	}
}

// Stop sends SIGTERM (after SIGCONT) and waits up to timeout, then kills.
func (p *Proc) Stop(timeout time.Duration) {
	_, _ = p.signal(syscall.SIGCONT)
	exited, err := p.signal(syscall.SIGTERM)
	if err != nil {
		return
	}
	select {
	case <-exited:
	case <-time.After(timeout):
		p.Kill()
	}
}

// Pause sends SIGSTOP; Resume sends SIGCONT.
func (p *Proc) Pause() error { _, err := p.signal(syscall.SIGSTOP); return err }

// Resume sends SIGCONT.
func (p *Proc) Resume() error { _, err := p.signal(syscall.SIGCONT); return err }

// Output is the process's log since its last start.
func (p *Proc) Output() string {
	p.mu.Lock()
	from := p.mu.from
	p.mu.Unlock()
	b, _ := os.ReadFile(p.Log)
	if int64(len(b)) < from {
		return ""
	}
	return string(b[from:])
}

// WaitReady waits until the process serves, or fails if it exits.
func (p *Proc) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		p.mu.Lock()
		exited, err := p.mu.exited, p.mu.err
		p.mu.Unlock()
		if exited == nil {
			return fmt.Errorf("%s was never started", p.Name)
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited before it was ready (%v); log %s:\n%s", p.Name, err, p.Log, tail(p.Output(), 3000))
		default:
		}
		if p.Ready != nil && p.Ready(p) || p.Ready == nil && bytes.Contains([]byte(p.Output()), []byte("ready")) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready in %s; log %s:\n%s", p.Name, timeout, p.Log, tail(p.Output(), 3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// procDir makes dir/name and returns it.
func procDir(dir, name string) (string, error) {
	d := filepath.Join(dir, name)
	return d, errors.Join(os.MkdirAll(d, 0o755))
}

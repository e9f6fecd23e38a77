package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

// TestStandaloneKill9KeepsAcknowledgedMessages produces from the official
// client to a standalone process, kills it with SIGKILL mid-stream,
// restarts it, and reads back every message whose send was acknowledged.
func TestStandaloneKill9KeepsAcknowledgedMessages(t *testing.T) {
	skipProcessesIfShort(t)
	dir := t.TempDir()
	port, web := freePort(t), freePort(t)
	args := []string{"standalone", "--data-dir", dir, "--bind-address", "127.0.0.1", "--advertised-address", "127.0.0.1",
		"--broker-port", strconv.Itoa(port), "--web-port", strconv.Itoa(web), "--config", os.DevNull}
	start := func() (*exec.Cmd, *syncBuffer) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "MAGNETAR_TEST_RUN_MAIN=1")
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(out.String(), "ready") {
			if time.Now().After(deadline) {
				t.Fatalf("standalone not ready:\n%s", out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		return cmd, out
	}
	cmd, _ := start()
	url := fmt.Sprintf("pulsar://127.0.0.1:%d", port)
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, Logger: plog.DefaultNopLogger(), OperationTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: "kill9", SendTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	for i := 0; i < 3000; i++ {
		if i == 1500 {
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
		wg.Add(1)
		payload := fmt.Sprintf("m%05d", i)
		prod.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: []byte(payload)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err == nil {
				mu.Lock()
				acked[payload] = true
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	client.Close()
	_ = cmd.Wait()
	if len(acked) < 100 {
		t.Fatalf("only %d sends acknowledged before the kill", len(acked))
	}
	start()
	client, err = pulsar.NewClient(pulsar.ClientOptions{URL: url, Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	reader, err := client.CreateReader(pulsar.ReaderOptions{Topic: "kill9", StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for len(seen) < len(acked) {
		m, err := reader.Next(ctx)
		if err != nil {
			missing := 0
			for p := range acked {
				if !seen[p] {
					missing++
				}
			}
			t.Fatalf("after kill -9 and restart: %d of %d acknowledged messages missing: %v", missing, len(acked), err)
		}
		if acked[string(m.Payload())] {
			seen[string(m.Payload())] = true
		}
	}
	t.Logf("%d acknowledged messages read back after kill -9", len(acked))
}

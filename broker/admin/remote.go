package admin

// Calls to another broker's admin API, for what spans brokers (the
// partitions of a partitioned topic are served wherever their bundles
// are).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// remoteTimeout bounds one admin call to another broker.
const remoteTimeout = 30 * time.Second

// RemoteError is another broker's answer to an admin call; StatusOf
// passes its status on, so the caller sees what the owner said.
type RemoteError struct {
	Status int
	Reason string
}

func (e *RemoteError) Error() string { return e.Reason }

// CallBroker makes an admin call on another broker and decodes its JSON
// answer into out (nil: the body is ignored). A non-2xx answer is a
// *RemoteError.
func CallBroker(ctx context.Context, method, target string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, target, err)
	}
	resp, err := (&http.Client{Timeout: remoteTimeout}).Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, target, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e errorBody
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		return &RemoteError{Status: resp.StatusCode, Reason: fmt.Sprintf("%s %s: %d %s", method, target, resp.StatusCode, e.Reason)}
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, target, err)
	}
	return nil
}

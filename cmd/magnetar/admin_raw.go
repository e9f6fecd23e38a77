package main

// Admin endpoints called without pulsaradmin's typed calls, because
// pulsaradmin v0.19 lacks them or gets them wrong:
//   - GET namespaces/{ns}/bundles and DELETE .../backlogQuota for a type
//     other than destination_storage: no call.
//   - GET broker-stats/load-report: GetLoadReport answers nil, nil on
//     every error.
//   - GET schemas/.../schema (latest, with its version):
//     GetSchemaInfoWithVersion prints failures on os.Stdout.
//   - GET bookies/all (bookies list-bookies, admin_bookies.go): no call.
//   - DELETE namespaces/{ns}/replicatorDispatchRate: no call; GET of it
//     answers a zero rate when none is set (admin_dispatchrate.go).
//   - POST .../subscription/{sub}/resetcursor and .../expireMessages with
//     a message id and isExcluded (reset-cursor --exclude, expire-messages
//     --position): no call takes isExcluded, none expires by position.
//   - GET .../examinemessage: no call. Its answer is a message like get
//     message by id, read as pulsaradmin's handleResp reads those.
//
// All but examinemessage go through pulsaradmin's rest.Client, so they
// fail with the same rest.Error; examinemessage needs the query string
// and the headers, which rest.Client cannot give together, and makes
// that error itself.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// maxRawBody bounds what a raw call reads: one message, or an error.
const maxRawBody = 64 << 20

// adminPath is an /admin/v2 path with each part escaped.
func adminPath(parts ...string) string {
	esc := make([]string, len(parts))
	for i, p := range parts {
		esc[i] = url.PathEscape(p)
	}
	return "/admin/v2/" + strings.Join(esc, "/")
}

// nsPath is the path of a namespace's resource: namespaces/{tenant}/{ns}/{what}.
func nsPath(ns *utils.NameSpaceName, what string) string {
	tenant, name, _ := strings.Cut(ns.String(), "/")
	return adminPath("namespaces", tenant, name, what)
}

// topicPath is the path of a topic's resource: {domain}/{tenant}/{ns}/{topic}/{what}.
func topicPath(t *utils.TopicName, what string) string {
	return adminPath(string(t.GetDomain()), t.GetTenant(), t.GetNamespace(), t.GetLocalName(), what)
}

func getBundles(env *adminEnv, ns *utils.NameSpaceName) (utils.BundlesData, error) {
	var b utils.BundlesData
	err := env.raw.Get(nsPath(ns, "bundles"), &b)
	return b, err
}

func removeBacklogQuota(env *adminEnv, ns *utils.NameSpaceName, typ utils.BacklogQuotaType) error {
	return env.raw.DeleteWithQueryParams(nsPath(ns, "backlogQuota"),
		map[string]string{"backlogQuotaType": string(typ)})
}

// getLoadReport decodes into a zero LocalBrokerData: NewLocalBrokerData,
// which pulsaradmin uses, seeds lastStats with a bundle named "".
func getLoadReport(env *adminEnv) (utils.LocalBrokerData, error) {
	var r utils.LocalBrokerData
	err := env.raw.Get(adminPath("broker-stats", "load-report"), &r)
	return r, err
}

// getLatestSchema is the topic's latest schema with its version.
func getLatestSchema(env *adminEnv, t *utils.TopicName) (utils.GetSchemaResponse, error) {
	var resp utils.GetSchemaResponse
	err := env.raw.Get(adminPath("schemas", t.GetTenant(), t.GetNamespace(), t.GetLocalName(), "schema"), &resp)
	return resp, err
}

// examineMessage is pulsar-admin topics examine-message: the n-th message
// from the start (earliest) or the end (latest) of the topic.
func examineMessage(env *adminEnv, t *utils.TopicName, initial string, n int64) ([]*utils.Message, error) {
	u, err := url.Parse(strings.TrimSuffix(env.url, "/") + topicPath(t, "examinemessage"))
	if err != nil {
		return nil, err
	}
	u.RawQuery = url.Values{"initialPosition": {initial}, "messagePosition": {strconv.FormatInt(n, 10)}}.Encode()
	resp, err := env.raw.HTTPClient.Get(u.String())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRawBody))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := rest.Error{Code: resp.StatusCode, Reason: resp.Status}
		if json.Unmarshal(body, &e) != nil && len(body) > 0 {
			e.Reason = string(body)
		}
		return nil, e
	}
	return messagesFromResponse(t, resp.Header, body)
}

// messagesFromResponse reads a message answer as pulsaradmin's
// handleResp does: the id, publish time and properties from the headers,
// the payload from the body, split into its messages when it is a batch.
func messagesFromResponse(t *utils.TopicName, h http.Header, body []byte) ([]*utils.Message, error) {
	id, err := utils.ParseMessageIDWithPartitionIndex(h.Get("X-Pulsar-Message-ID"), t.GetPartitionIndex())
	if err != nil {
		return nil, fmt.Errorf("message id header: %w", err)
	}
	props := map[string]string{}
	if v := h.Get(admin.PublishTimeHeader); v != "" {
		props["publish-time"] = v
	}
	if v := h.Get(admin.PropertyHeader); v != "" {
		if err := json.Unmarshal([]byte(v), &props); err != nil {
			return nil, fmt.Errorf("properties header: %w", err)
		}
	}
	for k := range h {
		if strings.HasPrefix(k, admin.PropertyPrefix) {
			props[strings.TrimPrefix(k, admin.PropertyPrefix)] = h.Get(k)
		}
	}
	batch := h.Get(admin.BatchHeader)
	if batch == "" {
		return []*utils.Message{utils.NewMessage(t.String(), *id, body, props)}, nil
	}
	props[admin.BatchHeader] = batch // as pulsaradmin's handleResp
	count, err := strconv.Atoi(batch)
	if err != nil || count < 0 || count > len(body) {
		return nil, fmt.Errorf("bad %s header %q", admin.BatchHeader, batch)
	}
	return splitBatch(t, *id, count, body, props)
}

// splitBatch splits a batch payload: count records of a 4-byte
// big-endian metadata size, a SingleMessageMetadata and the payload.
func splitBatch(t *utils.TopicName, id utils.MessageID, count int, data []byte, props map[string]string) ([]*utils.Message, error) {
	msgs := make([]*utils.Message, 0, count)
	r := bytes.NewReader(data)
	for i := range count {
		var size uint32
		if err := binary.Read(r, binary.BigEndian, &size); err != nil || int64(size) > int64(r.Len()) {
			return nil, fmt.Errorf("batch message %d: truncated metadata", i)
		}
		meta := make([]byte, size)
		_, _ = io.ReadFull(r, meta)
		var smm pb.SingleMessageMetadata
		if err := proto.Unmarshal(meta, &smm); err != nil {
			return nil, fmt.Errorf("batch message %d: %w", i, err)
		}
		if n := smm.GetPayloadSize(); n < 0 || int64(n) > int64(r.Len()) {
			return nil, fmt.Errorf("batch message %d: truncated payload", i)
		}
		payload := make([]byte, smm.GetPayloadSize())
		_, _ = io.ReadFull(r, payload)
		p := maps.Clone(props)
		for _, kv := range smm.GetProperties() {
			p[kv.GetKey()] = kv.GetValue()
		}
		id.BatchIndex = i
		msgs = append(msgs, utils.NewMessage(t.String(), id, payload, p))
	}
	return msgs, nil
}

// positionCall POSTs a ResetCursorData body (a message id and isExcluded)
// to the subscription's resetcursor or expireMessages.
func positionCall(env *adminEnv, t *utils.TopicName, sub, what string, id utils.MessageID, excluded bool) error {
	body := map[string]any{"ledgerId": id.LedgerID, "entryId": id.EntryID, "partitionIndex": id.PartitionIndex,
		"batchIndex": id.BatchIndex, "isExcluded": excluded}
	return env.raw.Post(topicPath(t, "subscription/"+url.PathEscape(sub)+"/"+what), body)
}

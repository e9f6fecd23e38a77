package admin

// Topic lookup for http:// service URLs (GET /lookup/v2/topic/...) and
// the partition count of any topic (GET/PUT /admin/v2/{domain}/.../partitions),
// as Pulsar's TopicLookup and PersistentTopics. A lookup of a topic
// served elsewhere answers 307 to that broker; a lookup that fails is 503.

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/magnetar-io/magnetar/metadata"
)

func (a *brokerAPI) registerLookup(mux *http.ServeMux) {
	mux.HandleFunc("GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}", a.lookup)
	mux.HandleFunc("GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions", a.partitions)
	mux.HandleFunc("PUT /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions", a.createPartitioned)
}

// pathTopic is the topic of a path with a {domain} wildcard; false after
// answering 400 for a bad name.
func (a *brokerAPI) pathTopic(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := topicOfPath(r, "")
	if err := a.b.CheckTopic(name); err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return "", false
	}
	return name, true
}

func (a *brokerAPI) lookup(w http.ResponseWriter, r *http.Request) {
	name, ok := a.pathTopic(w, r)
	if !ok {
		return
	}
	res, err := a.b.LookupTopic(r.Context(), name, r.URL.Query().Get("authoritative") == "true")
	if err != nil {
		WriteError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if res.Redirect {
		redirectTo(w, r, webURLFor(r, res.HTTPURL, res.HTTPURLTLS), res.Authoritative) // a TLS client stays on TLS
		return
	}
	httpURL, httpURLTLS := res.HTTPURL, res.HTTPURLTLS
	if res.Self || httpURL == "" {
		if r.TLS != nil {
			httpURLTLS = "https://" + webHost(r, a.b.AdvertisedAddress())
		} else {
			httpURL = "http://" + webHost(r, a.b.AdvertisedAddress())
		}
	}
	// Pulsar's LookupData: a client of an https:// service URL connects to
	// brokerUrlTls, others to brokerUrl.
	out := map[string]string{"brokerUrl": res.BrokerURL, "httpUrl": httpURL}
	if res.BrokerURLTLS != "" {
		out["brokerUrlTls"] = res.BrokerURLTLS
	}
	if httpURLTLS != "" {
		out["httpUrlTls"] = httpURLTLS
	}
	WriteJSON(w, out)
}

// webHost is the host:port the client reached us on for HTTP, falling
// back to the advertised host.
func webHost(r *http.Request, fallback string) string {
	if r.Host != "" {
		return r.Host
	}
	return strings.Split(fallback, ":")[0]
}

func (a *brokerAPI) partitions(w http.ResponseWriter, r *http.Request) {
	name, ok := a.pathTopic(w, r)
	if !ok {
		return
	}
	n, err := a.b.Partitions(r.Context(), name)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	WriteJSON(w, map[string]int{"partitions": n})
}

// createPartitioned is pulsar-admin topics create-partitioned-topic: the
// body is the partition count, or pulsaradmin's object with the count and
// the topic's properties. Pulsar answers 409 for a topic already
// partitioned and 400 for every other refusal.
func (a *brokerAPI) createPartitioned(w http.ResponseWriter, r *http.Request) {
	name, ok := a.pathTopic(w, r)
	if !ok {
		return
	}
	n, props, err := decodePartitionedMetadata(r.Body)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.b.CreatePartitioned(r.Context(), name, n, props); err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, metadata.ErrExists) {
			code = http.StatusConflict
		}
		WriteError(w, code, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// decodePartitionCount reads a partition count body: a number, or
// pulsaradmin's {"partitions": N, "properties": {...}}.
func decodePartitionCount(body io.Reader) (int, error) {
	n, _, err := decodePartitionedMetadata(body)
	return n, err
}

// decodePartitionedMetadata is decodePartitionCount with the properties
// the object form may carry (nil when none).
func decodePartitionedMetadata(body io.Reader) (int, map[string]string, error) {
	raw, err := io.ReadAll(io.LimitReader(body, 64<<10))
	if err != nil {
		return 0, nil, BadRequest("partitions", "read body: %v", err)
	}
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		return n, nil, nil
	}
	var md struct {
		Partitions *int              `json:"partitions"`
		Properties map[string]string `json:"properties"`
	}
	if err := json.Unmarshal(raw, &md); err != nil || md.Partitions == nil {
		return 0, nil, BadRequest("partitions", "body must be the number of partitions or {\"partitions\": N, \"properties\": {...}}")
	}
	return *md.Partitions, md.Properties, nil
}

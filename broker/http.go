package broker

import (
	"encoding/json"
	"net/http"
	"strings"
)

// HTTPHandler serves the HTTP endpoints clients use besides the binary
// protocol: topic lookup (for http:// service URLs) and partition counts.
// The admin REST API grows here with its issue.
func (b *Broker) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}", b.httpLookup)
	mux.HandleFunc("GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions", b.httpPartitions)
	mux.HandleFunc("GET /status.html", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("OK")) })
	return mux
}

// topicFromPath rebuilds the topic name of an HTTP path.
func topicFromPath(r *http.Request) (TopicName, error) {
	return ParseTopicName(r.PathValue("domain") + "://" + r.PathValue("tenant") + "/" +
		r.PathValue("namespace") + "/" + r.PathValue("topic"))
}

func (b *Broker) httpLookup(w http.ResponseWriter, r *http.Request) {
	if _, err := topicFromPath(r); err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	host := b.advertisedAddress()
	writeJSON(w, map[string]string{
		"brokerUrl": "pulsar://" + host,
		"httpUrl":   "http://" + webHost(r, host),
	})
}

// webHost is the host:port the client reached us on for HTTP, falling
// back to the advertised host.
func webHost(r *http.Request, fallback string) string {
	if r.Host != "" {
		return r.Host
	}
	return strings.Split(fallback, ":")[0]
}

func (b *Broker) httpPartitions(w http.ResponseWriter, r *http.Request) {
	if _, err := topicFromPath(r); err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, map[string]int{"partitions": 0})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// httpError answers in Pulsar's error shape, {"reason": "..."}.
func httpError(w http.ResponseWriter, code int, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"reason": reason})
}

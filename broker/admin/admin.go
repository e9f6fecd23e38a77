package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"

	"github.com/magnetar-io/magnetar/broker/resources"
)

// NamespaceTopics is the broker state the admin API needs and the
// configuration store does not hold: which topics exist.
type NamespaceTopics interface {
	// ListTopics returns the full names (persistent://tenant/ns/topic,
	// non-persistent://...) of a namespace's topics, partitions included.
	ListTopics(ctx context.Context, tenant, namespace string) ([]string, error)
}

// Config wires the admin API.
type Config struct {
	// Resources is the configuration store; required.
	Resources *resources.Resources
	// Namespaces answers for topics; required.
	Namespaces NamespaceTopics
	// ClusterName is this broker's cluster (Pulsar's clusterName): new
	// namespaces replicate to it unless told otherwise.
	ClusterName string
	// Logger receives server-side failures and changes made; nil discards.
	Logger *slog.Logger
}

type api struct {
	res     *resources.Resources
	topics  NamespaceTopics
	cluster string
	log     *slog.Logger
}

// Register adds the admin v2 endpoints for clusters, tenants and
// namespaces to mux. It panics if Resources or Namespaces is missing: the
// endpoints cannot answer truthfully without them.
func Register(mux *http.ServeMux, cfg Config) {
	if cfg.Resources == nil || cfg.Namespaces == nil {
		panic("admin.Register: Config.Resources and Config.Namespaces are required")
	}
	a := &api{res: cfg.Resources, topics: cfg.Namespaces, cluster: cfg.ClusterName, log: cfg.Logger}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.registerClusters(mux)
	a.registerTenants(mux)
	a.registerNamespaces(mux)
	a.registerPolicies(mux)
}

// maxBodyBytes bounds a request body: the largest policies fit in a
// metadata node (metadata.MaxValueSize), so no valid body is larger.
const maxBodyBytes = 1 << 20

// errNoBody reports an empty request body, which some endpoints accept.
var errNoBody = errors.New("request body is required")

// decodeBody decodes the JSON request body into v. Decoding errors are
// ErrInvalid naming the field (field prefixes the member path).
func decodeBody(w http.ResponseWriter, r *http.Request, field string, v any) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		return invalid(field, "reading the request body: "+err.Error())
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return errNoBody
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return jsonError(field, err)
	}
	return nil
}

// requireBody is decodeBody for endpoints that need a body.
func requireBody(w http.ResponseWriter, r *http.Request, field string, v any) error {
	err := decodeBody(w, r, field, v)
	if errors.Is(err, errNoBody) {
		return invalid(field, errNoBody.Error())
	}
	return err
}

// jsonError turns a decoding error into one that names the member.
func jsonError(field string, err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		if typeErr.Field != "" {
			field += "." + typeErr.Field
		}
		return invalid(field, fmt.Sprintf("want %s, got JSON %s", typeErr.Type, typeErr.Value))
	case errors.As(err, &syntaxErr):
		return invalid(field, fmt.Sprintf("malformed JSON at byte %d: %v", syntaxErr.Offset, err))
	}
	return invalid(field, err.Error())
}

// done answers a successful change: 204, as Pulsar's void operations.
func done(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }

// mergeExtra overlays the unmodelled members of a request body on those
// already stored, so a client that does not know a member (pulsaradmin
// lacks several of Pulsar's) does not erase it by replacing the rest.
func mergeExtra(stored, body map[string]json.RawMessage) map[string]json.RawMessage {
	if len(stored) == 0 {
		return body
	}
	out := maps.Clone(stored)
	maps.Copy(out, body)
	return out
}

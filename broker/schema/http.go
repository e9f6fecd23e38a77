package schema

// Behavior of the admin endpoints, as Pulsar's SchemasResource and as
// pulsaradmin (pkg/admin/schema.go) calls them:
//
//   - GET .../schema and .../schema/{version}: GetSchemaResponse; 404 when
//     the topic has no schema or not that version.
//   - GET .../schemas: {"getSchemaResponses": [...]} since the last
//     deletion, possibly empty.
//   - POST .../schema: PostSchemaPayload, stored as PutAdmin does; 409
//     incompatible, 422 invalid schema data, 406 for BYTES (Pulsar's
//     "BYTES is the default schema type"). In every payload a KEY_VALUE
//     "schema" is the {"key": ..., "value": ...} form, packed as Pulsar's
//     postSchema does (Pulsar's compatibility and version endpoints skip
//     the packing, a bug not copied).
//   - DELETE .../schema: soft delete; ?force=true removes the history.
//   - POST .../compatibility: {"compatibility": bool,
//     "schemaCompatibilityStrategy": name}. An incompatible schema answers
//     200 with false; Pulsar surfaces the checker's exception instead,
//     which gives clients nothing to read the verdict from.
//   - POST .../version: {"version": n}, -1 when not registered.
//
// Errors are {"reason": "..."}, which pulsaradmin's rest.Error reads.

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
)

const adminPrefix = "/admin/v2/schemas/{tenant}/{namespace}/{topic}"

// maxBodyBytes bounds a request body: the largest schema data, escaped in
// JSON, with room for properties.
const maxBodyBytes = 4*MaxDataSize + 64<<10

// Register adds the admin schema endpoints to mux.
func (r *Registry) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+adminPrefix+"/schema", r.httpGetLatest)
	mux.HandleFunc("GET "+adminPrefix+"/schema/{version}", r.httpGetVersion)
	mux.HandleFunc("GET "+adminPrefix+"/schemas", r.httpGetAll)
	mux.HandleFunc("POST "+adminPrefix+"/schema", r.httpPost)
	mux.HandleFunc("DELETE "+adminPrefix+"/schema", r.httpDelete)
	mux.HandleFunc("POST "+adminPrefix+"/compatibility", r.httpCompatibility)
	mux.HandleFunc("POST "+adminPrefix+"/version", r.httpFindVersion)
}

// getSchemaResponse is Pulsar's GetSchemaResponse.
type getSchemaResponse struct {
	Version    int64             `json:"version"`
	Type       string            `json:"type"`
	Timestamp  int64             `json:"timestamp"`
	Data       string            `json:"data"`
	Properties map[string]string `json:"properties"`
}

// postSchemaPayload is Pulsar's PostSchemaPayload.
type postSchemaPayload struct {
	Type       string            `json:"type"`
	Schema     string            `json:"schema"`
	Properties map[string]string `json:"properties"`
}

func topicOf(req *http.Request) string {
	return req.PathValue("tenant") + "/" + req.PathValue("namespace") + "/" + req.PathValue("topic")
}

func (r *Registry) httpGetLatest(w http.ResponseWriter, req *http.Request) {
	v, err := r.GetLatest(req.Context(), topicOf(req))
	r.writeVersion(w, v, err)
}

func (r *Registry) httpGetVersion(w http.ResponseWriter, req *http.Request) {
	n, err := strconv.ParseInt(req.PathValue("version"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "schema version must be a number: "+err.Error())
		return
	}
	v, err := r.GetVersion(req.Context(), topicOf(req), n)
	r.writeVersion(w, v, err)
}

func (r *Registry) writeVersion(w http.ResponseWriter, v Version, err error) {
	if err != nil {
		r.writeErr(w, err)
		return
	}
	resp, err := toResponse(v)
	if err != nil {
		r.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (r *Registry) httpGetAll(w http.ResponseWriter, req *http.Request) {
	vs, err := r.GetAll(req.Context(), topicOf(req))
	if err != nil {
		r.writeErr(w, err)
		return
	}
	out := struct {
		Schemas []getSchemaResponse `json:"getSchemaResponses"`
	}{Schemas: make([]getSchemaResponse, 0, len(vs))}
	for _, v := range vs {
		resp, err := toResponse(v)
		if err != nil {
			r.writeErr(w, err)
			return
		}
		out.Schemas = append(out.Schemas, resp)
	}
	writeJSON(w, http.StatusOK, out)
}

// toResponse renders a version; KEY_VALUE data in the REST API's form.
func toResponse(v Version) (getSchemaResponse, error) {
	data := string(v.Data)
	if v.Type == KeyValue {
		var err error
		if data, err = keyValueToAdmin(v.Info); err != nil {
			return getSchemaResponse{}, err
		}
	}
	return getSchemaResponse{Version: v.Version, Type: v.Type.String(), Timestamp: v.Timestamp.UnixMilli(),
		Data: data, Properties: v.Properties}, nil
}

// readPayload decodes a PostSchemaPayload into an Info.
func readPayload(w http.ResponseWriter, req *http.Request) (Info, bool) {
	var p postSchemaPayload
	if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, maxBodyBytes)).Decode(&p); err != nil {
		writeError(w, http.StatusBadRequest, "body must be a schema payload {type, schema, properties}: "+err.Error())
		return Info{}, false
	}
	t, err := ParseType(p.Type)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return Info{}, false
	}
	info := Info{Type: t, Data: []byte(p.Schema), Properties: p.Properties}
	if t == KeyValue {
		if info.Data, err = keyValueFromAdmin(p.Schema); err != nil {
			writeError(w, http.StatusUnprocessableEntity, err.Error())
			return Info{}, false
		}
	}
	return info, true
}

func (r *Registry) httpPost(w http.ResponseWriter, req *http.Request) {
	info, ok := readPayload(w, req)
	if !ok {
		return
	}
	if info.Type == Bytes {
		writeError(w, http.StatusNotAcceptable, "do not upload a BYTES schema: it is the default schema type")
		return
	}
	v, err := r.PutAdmin(req.Context(), topicOf(req), info, "")
	if err != nil {
		r.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"version": v})
}

func (r *Registry) httpDelete(w http.ResponseWriter, req *http.Request) {
	force, _ := strconv.ParseBool(req.URL.Query().Get("force"))
	var v int64
	var err error
	if force {
		v, err = r.HardDelete(req.Context(), topicOf(req))
	} else {
		v, err = r.Delete(req.Context(), topicOf(req), "")
	}
	if err != nil {
		r.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"version": v})
}

func (r *Registry) httpCompatibility(w http.ResponseWriter, req *http.Request) {
	info, ok := readPayload(w, req)
	if !ok {
		return
	}
	s, err := r.CheckCompatibility(req.Context(), topicOf(req), info)
	if err != nil && !errors.Is(err, ErrIncompatible) {
		r.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Compatible bool   `json:"compatibility"`
		Strategy   string `json:"schemaCompatibilityStrategy"`
	}{Compatible: err == nil, Strategy: s.String()})
}

func (r *Registry) httpFindVersion(w http.ResponseWriter, req *http.Request) {
	info, ok := readPayload(w, req)
	if !ok {
		return
	}
	v, err := r.FindVersion(req.Context(), topicOf(req), info)
	if err != nil {
		r.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"version": v})
}

// writeErr maps the registry's errors to Pulsar's statuses.
func (r *Registry) writeErr(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrIncompatible):
		code = http.StatusConflict
	case errors.Is(err, ErrInvalidSchema):
		code = http.StatusUnprocessableEntity
	case errors.Is(err, ErrInvalidTopic):
		code = http.StatusPreconditionFailed // Pulsar's "Topic name is not valid"
	}
	if code == http.StatusInternalServerError {
		r.log.Error("schema admin request failed", "err", err)
	}
	writeError(w, code, err.Error())
}

func writeError(w http.ResponseWriter, code int, reason string) {
	writeJSON(w, code, map[string]string{"reason": reason})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

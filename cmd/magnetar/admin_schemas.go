package main

// magnetar admin schemas: get, upload, delete and compatibility, as
// pulsar-admin's. Files for upload and compatibility hold Pulsar's
// PostSchemaPayload: {"type": "AVRO", "schema": "...", "properties": {}}.

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// readSchemaFile reads a PostSchemaPayload file given with --filename.
func readSchemaFile(name string) (utils.PostSchemaPayload, error) {
	var p utils.PostSchemaPayload
	if name == "" {
		return p, usageErrorf("--filename is required")
	}
	raw, err := os.ReadFile(name)
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return p, fmt.Errorf("%s: not a schema definition (want JSON with type, schema and properties): %w", name, err)
	}
	if p.SchemaType == "" {
		return p, fmt.Errorf("%s: the schema definition has no type", name)
	}
	return p, nil
}

func schemaCmds() []adminCmd {
	return []adminCmd{
		topicCmd("get", "show a topic's latest schema, one version, or all", func(fs *flag.FlagSet) topicAction {
			version := fs.Int64("version", -1, "schema version (default: the latest)")
			all := fs.Bool("all", false, "show every version")
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				switch {
				case *all && *version >= 0:
					return replyNone(), usageErrorf("give at most one of --version and --all")
				case *all:
					infos, err := env.api.Schemas().GetAllSchemas(t.String())
					out := make([]utils.GetSchemaResponse, 0, len(infos))
					for _, info := range infos {
						out = append(out, schemaResponse(info.Version, info.SchemaInfo))
					}
					return replySchemas(out...), err
				case *version >= 0:
					info, err := env.api.Schemas().GetSchemaInfoByVersion(t.String(), *version)
					if err != nil {
						return replyNone(), err
					}
					return replySchemas(schemaResponse(*version, info)), nil
				}
				s, err := getLatestSchema(env, t)
				if err != nil {
					return replyNone(), err
				}
				return replySchemas(s), nil
			}
		}),
		topicCmd("upload", "add a schema version to a topic", func(fs *flag.FlagSet) topicAction {
			file := fs.String("filename", "", "schema definition file (required)")
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				p, err := readSchemaFile(*file)
				if err != nil {
					return replyNone(), err
				}
				return replyNone(), env.api.Schemas().CreateSchemaByPayload(t.String(), p)
			}
		}),
		topicCmd("delete", "delete a topic's schemas", func(fs *flag.FlagSet) topicAction {
			force := fs.Bool("force", false, "delete even when the topic's policies would keep it")
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				if *force {
					return replyNone(), env.api.Schemas().ForceDeleteSchema(t.String())
				}
				return replyNone(), env.api.Schemas().DeleteSchema(t.String())
			}
		}),
		topicCmd("compatibility", "test whether a schema could be added to a topic", func(fs *flag.FlagSet) topicAction {
			file := fs.String("filename", "", "schema definition file (required)")
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				p, err := readSchemaFile(*file)
				if err != nil {
					return replyNone(), err
				}
				c, err := env.api.Schemas().TestCompatibilityWithPostSchemaPayload(t.String(), p)
				if err != nil {
					return replyNone(), err
				}
				return replyText(c, func(w io.Writer) {
					fmt.Fprintf(w, "compatible: %t (strategy %s)\n", c.IsCompatibility, c.SchemaCompatibilityStrategy)
				}), nil
			}
		}),
	}
}

// schemaResponse is a schema in the API's own form, its definition as
// text (pulsaradmin's SchemaInfo holds bytes, which JSON shows as base64).
func schemaResponse(version int64, info *utils.SchemaInfo) utils.GetSchemaResponse {
	if info == nil {
		return utils.GetSchemaResponse{Version: version}
	}
	return utils.GetSchemaResponse{Version: version, Type: info.Type, Timestamp: info.Timestamp,
		Data: string(info.Schema), Properties: info.Properties}
}

// replySchemas prints one schema as an object, several as a list.
func replySchemas(s ...utils.GetSchemaResponse) adminReply {
	var v any = s
	if len(s) == 1 {
		v = s[0]
	}
	return replyText(v, func(w io.Writer) {
		for i, r := range s {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "version: %d\ntype: %s\n", r.Version, r.Type)
			if r.Timestamp > 0 {
				fmt.Fprintf(w, "timestamp: %s\n", time.UnixMilli(r.Timestamp).UTC().Format(time.RFC3339Nano))
			}
			for _, k := range slices.Sorted(maps.Keys(r.Properties)) {
				fmt.Fprintf(w, "property %s: %s\n", k, r.Properties[k])
			}
			if r.Data != "" {
				fmt.Fprintf(w, "schema: %s\n", r.Data)
			}
		}
	})
}

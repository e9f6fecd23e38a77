package broker

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/magnetar-io/magnetar/broker/admin"
)

// Legacy (v1) REST routes. Pulsar keeps serving the admin and lookup routes
// of its v1 names (property/cluster/namespace), which older tools and
// clients still call:
//
//	/admin/namespaces/{property}                         the property's namespaces
//	/admin/namespaces/{property}/{cluster}               its namespaces in one cluster
//	/admin/namespaces/{property}/{cluster}/{ns}/...      a namespace, its policies, bundles, unload
//	/admin/{domain}/{property}/{cluster}/{ns}/...        topics: list, stats, permissions, subscriptions, ...
//	/admin/schemas/{property}/{cluster}/{ns}/{topic}/... schemas
//	/lookup/v2/destination/{domain}/{property}/{cluster}/{ns}/{topic}
//
// Each is served by the v2 route of the same meaning, with the namespace
// "cluster/ns" as one escaped path segment (cluster%2Fns): Go's ServeMux
// matches escaped segments and unescapes path values, so the v2 handlers
// see namespace "cluster/ns", which every layer below takes for a v1
// namespace (TopicName, resources). The rewrite runs before
// authentication, so authorization sees the v2 form too.
func v1Rewrite(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, q, ok := v1ToV2(r.URL.EscapedPath()); ok {
			r2 := admin.WithRequestPath(r, r.URL.EscapedPath())
			u := *r.URL
			u.RawPath = p
			if unescaped, err := url.PathUnescape(p); err == nil {
				u.Path = unescaped
			}
			if q != "" {
				vals := u.Query()
				for k, v := range mustParseQuery(q) {
					vals[k] = v
				}
				u.RawQuery = vals.Encode()
			}
			r2.URL = &u
			r = r2
		}
		next.ServeHTTP(w, r)
	})
}

// v1ToV2 maps an escaped v1 path to the escaped v2 path serving it, plus
// query parameters to add; ok is false for every other path.
func v1ToV2(path string) (v2, query string, ok bool) {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	v1ns := func(prefix []string, i int) (string, bool) {
		if len(segs) < i+3 || segs[i] == "" || segs[i+1] == "" || segs[i+2] == "" {
			return "", false
		}
		out := append(append([]string{}, prefix...), segs[i], segs[i+1]+"%2F"+segs[i+2])
		return "/" + strings.Join(append(out, segs[i+3:]...), "/"), true
	}
	switch {
	case len(segs) >= 3 && segs[0] == "admin" && segs[1] == "namespaces":
		switch len(segs) {
		case 3:
			return "/admin/v2/namespaces/" + segs[2], "", true
		case 4:
			return "/admin/v2/namespaces/" + segs[2], "v1Cluster=" + segs[3], true
		}
		v2, ok = v1ns([]string{"admin", "v2", "namespaces"}, 2)
		return v2, "", ok
	case len(segs) >= 5 && segs[0] == "admin" && (segs[1] == "persistent" || segs[1] == "non-persistent"):
		v2, ok = v1ns([]string{"admin", "v2", segs[1]}, 2)
		return v2, "", ok
	case len(segs) >= 6 && segs[0] == "admin" && segs[1] == "schemas":
		v2, ok = v1ns([]string{"admin", "v2", "schemas"}, 2)
		return v2, "", ok
	case len(segs) == 8 && segs[0] == "lookup" && segs[1] == "v2" && segs[2] == "destination":
		v2, ok = v1ns([]string{"lookup", "v2", "topic", segs[3]}, 4)
		return v2, "", ok
	}
	return "", "", false
}

func mustParseQuery(q string) url.Values {
	v, _ := url.ParseQuery(q)
	return v
}

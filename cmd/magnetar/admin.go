package main

// magnetar admin: Pulsar's admin REST API v2 from the command line, with
// pulsar-admin's group and command names, over the official client
// library (pulsaradmin). This file holds the dispatch, the flags, the
// errors and the output; admin_<group>.go files hold the commands.
//
// Behaviour:
//   - magnetar admin [--admin-url URL] [--output text|json] GROUP COMMAND [ARGS] [flags].
//     The global flags may also come after the command, and flags and
//     arguments may be mixed (pulsar-admin's "set-retention NS --time 3h").
//   - --admin-url defaults to $MAGNETAR_ADMIN_URL, else http://localhost:8080.
//   - Exit status: 0 done; 1 the server refused (its reason is printed) or
//     could not be reached, or a local file could not be read; 2 a usage
//     error (unknown command, bad flag value, missing argument), printed
//     with the command's usage.
//   - Output goes to stdout. --output json prints the decoded API result,
//     indented ("null" for a policy that is not set). Text output prints
//     lists one item a line, objects as "key: value" lines (nested members
//     joined with dots), stats as summaries and tables. Changes print
//     nothing, as pulsar-admin's do, except where the server answers
//     something (terminate's last message id).
//   - Commands use pulsaradmin's calls; the few endpoints it lacks or gets
//     wrong are called over HTTP in admin_raw.go, with the same errors.

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
)

// defaultAdminURL is used when neither --admin-url nor $MAGNETAR_ADMIN_URL is set.
const defaultAdminURL = "http://localhost:8080"

// adminGroup is a pulsar-admin command group (tenants, topics, ...).
type adminGroup struct {
	name, summary string
	cmds          []adminCmd
}

// adminCmd is one command of a group.
type adminCmd struct {
	name    string
	args    []string // names of the positional arguments, all required
	summary string
	// setup defines the command's flags on fs and returns its action,
	// which reads them once fs is parsed.
	setup func(fs *flag.FlagSet) adminAction
}

// adminAction runs a command with its positional arguments.
type adminAction func(env *adminEnv, args []string) (adminReply, error)

// adminReply is what a command prints.
type adminReply struct {
	// value is the decoded API result printed by --output json; nil (the
	// untyped nil) for a change that answers nothing. A typed nil pointer
	// prints as null: a policy that is not set.
	value any
	// text prints the human form; nil prints value as "key: value" lines.
	text func(w io.Writer)
}

// adminEnv is what actions talk to.
type adminEnv struct {
	api admin.Client
	// raw calls, with pulsaradmin's error handling, the endpoints
	// pulsaradmin lacks; url is the service URL for those it cannot call.
	raw *rest.Client
	url string
}

// adminUsageError is a usage mistake found after parsing (a bad flag
// value, flags that exclude each other): exit 2 with the usage.
type adminUsageError struct{ msg string }

func (e *adminUsageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &adminUsageError{msg: fmt.Sprintf(format, args...)}
}

// flagGiven reports whether the flag was set on the command line, under
// its name or one of its short forms (addShortFlags: they share its Value).
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	named := fs.Lookup(name)
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name || (named != nil && f.Value == named.Value) })
	return given
}

// noFlags is the setup of a command without flags.
func noFlags(run adminAction) func(*flag.FlagSet) adminAction {
	return func(*flag.FlagSet) adminAction { return run }
}

func adminGroups() []adminGroup {
	return []adminGroup{
		{"clusters", "list, get, create, update and delete clusters", clusterCmds()},
		{"tenants", "list, get, create, update and delete tenants", tenantCmds()},
		{"namespaces", "namespaces, their bundles and policies", namespaceCmds()},
		{"topics", "topics, partitioned topics, stats, subscriptions and messages", topicCmds()},
		{"brokers", "active brokers, the leader, health and owned namespaces", brokerCmds()},
		{"transactions", "transaction coordinators, transactions, buffers and pending acknowledgements", transactionCmds()},
		{"broker-stats", "the broker's load report", brokerStatsCmds()},
		{"bookies", "the cluster's bookies: writable, read-only and why", bookieCmds()},
		{"schemas", "get, upload, delete and test topic schemas", schemaCmds()},
	}
}

// adminGlobals are the flags every admin command takes.
type adminGlobals struct {
	url, output string
	sec         adminSecurity // adminauth.go
}

func (g *adminGlobals) define(fs *flag.FlagSet) {
	fs.StringVar(&g.url, "admin-url", g.url, "admin service URL (env MAGNETAR_ADMIN_URL; client.conf webServiceUrl)")
	fs.StringVar(&g.output, "output", g.output, "output format: text or json")
	g.sec.define(fs)
}

// runAdmin is magnetar admin.
func runAdmin(args []string, stdout, stderr io.Writer) int {
	g := adminGlobals{url: os.Getenv("MAGNETAR_ADMIN_URL"), output: "text"}
	fromEnv := g.url != ""
	if !fromEnv {
		g.url = defaultAdminURL
	}
	if err := g.applyClientConf(fromEnv); err != nil {
		fmt.Fprintf(stderr, "magnetar admin: %v\n", err)
		return 2
	}
	fs := flag.NewFlagSet("magnetar admin", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.define(fs)
	if err := fs.Parse(args); err != nil {
		return adminUsageExit(err, stdout, stderr, "magnetar admin", func(w io.Writer) { adminUsage(w, fs) })
	}
	cmdArgs := fs.Args()
	if len(cmdArgs) == 0 || cmdArgs[0] == "help" {
		adminUsage(stdout, fs)
		return 0
	}
	groups := adminGroups()
	i := findGroup(groups, cmdArgs[0])
	if i < 0 {
		fmt.Fprintf(stderr, "magnetar admin: unknown command group %q\n\n", cmdArgs[0])
		adminUsage(stderr, fs)
		return 2
	}
	grp := groups[i]
	if len(cmdArgs) < 2 || cmdArgs[1] == "help" || cmdArgs[1] == "-h" || cmdArgs[1] == "--help" {
		w, code := stderr, 2
		if len(cmdArgs) >= 2 {
			w, code = stdout, 0
		}
		groupUsage(w, grp)
		return code
	}
	for _, c := range grp.cmds {
		if c.name == cmdArgs[1] {
			return runAdminCmd(grp, c, g, cmdArgs[2:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "magnetar admin %s: unknown command %q\n\n", grp.name, cmdArgs[1])
	groupUsage(stderr, grp)
	return 2
}

func findGroup(groups []adminGroup, name string) int {
	for i, g := range groups {
		if g.name == name {
			return i
		}
	}
	return -1
}

// runAdminCmd parses a command's flags and arguments, runs it and prints
// its reply or error; it returns the exit status.
func runAdminCmd(grp adminGroup, c adminCmd, g adminGlobals, args []string, stdout, stderr io.Writer) int {
	name := "magnetar admin " + grp.name + " " + c.name
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	action := c.setup(fs)
	g.define(fs)
	addShortFlags(fs)
	usage := func(w io.Writer) { cmdUsage(w, name, c, fs) }
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return adminUsageExit(err, stdout, stderr, name, usage)
	}
	if len(pos) != len(c.args) {
		err = fmt.Errorf("want %d arguments (%s), got %d", len(c.args), strings.Join(c.args, " "), len(pos))
		if len(c.args) == 0 {
			err = fmt.Errorf("unexpected arguments %q", pos)
		}
		return adminUsageExit(err, stdout, stderr, name, usage)
	}
	if g.output != "text" && g.output != "json" {
		return adminUsageExit(fmt.Errorf("--output: want text or json, got %q", g.output), stdout, stderr, name, usage)
	}
	if u, err := url.Parse(g.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return adminUsageExit(fmt.Errorf("--admin-url %q: want http://host:port or https://host:port", g.url), stdout, stderr, name, usage)
	}
	api, raw, err := g.sec.clients(g.url)
	if err != nil {
		return adminUsageExit(err, stdout, stderr, name, usage)
	}
	env := &adminEnv{api: api, raw: raw, url: g.url}
	reply, err := action(env, pos)
	var ue *adminUsageError
	switch {
	case errors.As(err, &ue):
		return adminUsageExit(err, stdout, stderr, name, usage)
	case err != nil:
		fmt.Fprintf(stderr, "%s: %s\n", name, adminErrorText(err))
		return 1
	}
	if err := writeReply(stdout, reply, g.output == "json"); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}

// parseInterleaved parses flags that may come before, between and after
// the positional arguments, which it returns. Arguments after "--" are
// positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		left := fs.Args()
		if len(left) == 0 {
			return pos, nil
		}
		if used := len(args) - len(left); used > 0 && args[used-1] == "--" {
			return append(pos, left...), nil
		}
		pos = append(pos, left[0])
		args = left[1:]
	}
}

// adminUsageExit prints the usage for -h (exit 0) or the error and the
// usage (exit 2).
func adminUsageExit(err error, stdout, stderr io.Writer, name string, usage func(io.Writer)) int {
	if errors.Is(err, flag.ErrHelp) {
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n\n", name, err)
	usage(stderr)
	return 2
}

// adminErrorText is an error as the user should read it: the server's
// reason and status for a refusal, the cause otherwise.
func adminErrorText(err error) string {
	var re rest.Error
	if errors.As(err, &re) {
		reason := strings.TrimSpace(re.Reason)
		if reason == "" {
			reason = "no reason given"
		}
		return fmt.Sprintf("%s (HTTP %d)", reason, re.Code)
	}
	return err.Error()
}

func adminUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "usage: magnetar admin [--admin-url URL] [--output text|json] <group> <command> [args] [flags]\n\ngroups:")
	for _, g := range adminGroups() {
		fmt.Fprintf(w, "  %-13s %s\n", g.name, g.summary)
	}
	fmt.Fprintln(w, "\nglobal flags:")
	printFlags(w, fs)
}

func groupUsage(w io.Writer, g adminGroup) {
	fmt.Fprintf(w, "usage: magnetar admin %s <command> [args] [flags]\n\ncommands:\n", g.name)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, c := range g.cmds {
		fmt.Fprintf(tw, "  %s %s\t%s\n", c.name, strings.Join(c.args, " "), c.summary)
	}
	tw.Flush()
}

func cmdUsage(w io.Writer, name string, c adminCmd, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s %s [flags]\n\n%s\n\nflags:\n", name, strings.Join(c.args, " "), c.summary)
	printFlags(w, fs)
}

func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// writeReply prints a command's reply as JSON or text.
func writeReply(w io.Writer, r adminReply, asJSON bool) error {
	switch {
	case asJSON && r.value == nil:
		return nil
	case asJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(r.value)
	case r.text != nil:
		r.text(w)
		return nil
	case r.value == nil:
		return nil
	}
	return writeFlat(w, r.value)
}

// Replies.

func replyNone() adminReply { return adminReply{} }

// replyObject prints v as "key: value" lines.
func replyObject(v any) adminReply { return adminReply{value: v} }

// replyLines prints the items one a line.
func replyLines(items []string) adminReply {
	if items == nil {
		items = []string{}
	}
	return adminReply{value: items, text: func(w io.Writer) {
		for _, s := range items {
			fmt.Fprintln(w, s)
		}
	}}
}

// replyText prints v as text with f.
func replyText(v any, f func(w io.Writer)) adminReply { return adminReply{value: v, text: f} }

// writeTable prints an aligned table with a header row.
func writeTable(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

// sortedRows sorts table rows by their first column.
func sortedRows(rows [][]string) [][]string {
	sort.Slice(rows, func(i, j int) bool { return rows[i][0] < rows[j][0] })
	return rows
}

// writeFlat prints v as "key: value" lines, keys sorted: nested members
// joined with dots, lists of plain values joined with ", ", empty lists
// as "(none)"; null members and empty objects are left out, and v null
// prints "(not set)".
func writeFlat(w io.Writer, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return err
	}
	var lines [][2]string
	flatten("", x, &lines)
	if x == nil {
		fmt.Fprintln(w, "(not set)")
		return nil
	}
	if len(lines) == 1 && lines[0][0] == "" {
		fmt.Fprintln(w, lines[0][1])
		return nil
	}
	for _, l := range lines {
		fmt.Fprintf(w, "%s: %s\n", l[0], l[1])
	}
	return nil
}

func flatten(prefix string, x any, out *[][2]string) {
	join := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	switch v := x.(type) {
	case nil:
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			flatten(join(k), v[k], out)
		}
	case []any:
		if len(v) == 0 {
			*out = append(*out, [2]string{prefix, "(none)"})
			return
		}
		plain := make([]string, 0, len(v))
		for _, e := range v {
			switch e.(type) {
			case map[string]any, []any, nil:
				for i, e := range v {
					flatten(fmt.Sprintf("%s[%d]", prefix, i), e, out)
				}
				return
			}
			plain = append(plain, fmt.Sprint(e))
		}
		*out = append(*out, [2]string{prefix, strings.Join(plain, ", ")})
	default:
		*out = append(*out, [2]string{prefix, fmt.Sprint(v)})
	}
}

// shortFlags are pulsar-admin's other forms (one-letter, short and
// camel-case spellings) of flags our commands define under the long name,
// in order of precedence.
func shortFlags() []struct{ long, short string } {
	return []struct{ long, short string }{
		{"partitions", "p"}, {"subscription", "s"}, {"force", "f"}, {"time", "t"}, {"size", "s"},
		{"count", "n"}, {"messageId", "m"}, {"bundle", "b"}, {"clusters", "c"}, {"role", "r"},
		{"type", "t"}, {"limit-size", "l"}, {"policy", "p"}, {"filename", "f"}, {"config", "c"}, {"value", "v"},
		{"admin-roles", "r"}, {"allowed-clusters", "c"}, {"bundles", "b"}, {"ttl", "messageTTL"},
		{"limit-size", "limit"}, {"limit-time", "lt"}, {"limit-time", "limitTime"}, {"enable", "e"}, {"disable", "d"},
		{"unload", "u"}, {"expireTime", "t"}, {"initialPosition", "i"}, {"messagePosition", "m"},
		{"ledger-id", "l"}, {"ledger-id", "ledgerId"}, {"entry-id", "e"}, {"entry-id", "entryId"},
		{"compatibility", "c"}, {"all", "a"}, {"exclude", "e"}, {"exclude", "excludeResetPosition"},
		{"size-threshold", "s"},
	}
}

// addShortFlags lets a command's flags be given as pulsar-admin's
// one-letter forms, where the command defines the long one and nothing
// else took the letter.
func addShortFlags(fs *flag.FlagSet) {
	for _, sf := range shortFlags() {
		long := fs.Lookup(sf.long)
		if long == nil || fs.Lookup(sf.short) != nil {
			continue
		}
		fs.Var(long.Value, sf.short, "short for --"+sf.long)
	}
}

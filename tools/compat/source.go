package main

// What the suite's source says about each test: whether it needs docker
// (testcontainers), TLS or authentication, or transactions. Read with
// go/parser from the module's pulsar/*_test.go; a test inherits what the
// test-file helpers it calls (transitively) use.

import (
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
)

// needs is what a test needs beyond a plain broker on localhost.
type needs struct {
	Docker       bool // starts a container through testcontainers
	Security     bool // TLS, https, token/basic/TLS authentication, the auth namespace
	Transactions bool // a transaction coordinator
}

// Identifiers and string literals that mark a need in the suite's source.
var (
	dockerIdents   = map[string]bool{"testcontainers": true}
	securityIdents = map[string]bool{
		"serviceURLTLS": true, "webServiceURLTLS": true, "caCertsPath": true,
		"tlsClientCertPath": true, "tlsClientKeyPath": true, "tokenFilePath": true,
		"NewAuthenticationToken": true, "NewAuthenticationTokenFromFile": true,
		"NewAuthenticationTokenFromSupplier": true, "NewAuthenticationTLS": true,
		"NewAuthenticationFromTLSCertSupplier": true, "NewAuthenticationBasic": true,
		"NewAuthenticationOAuth2": true, "NewAuthenticationAthenz": true,
		"TLSTrustCertsFilePath": true, "TLSAllowInsecureConnection": true,
	}
	// A TLS URL of the service under test (localhost), not any https
	// string: an offload policy's S3 endpoint needs no TLS from us.
	securityLiteral = regexp.MustCompile(`^(pulsar\+ssl|https)://(localhost|127\.0\.0\.1|\[::1\])\b|integration-tests/(certs|tokens)|private/auth`)
	txnIdents       = map[string]bool{"EnableTransaction": true}
	txnName         = regexp.MustCompile(`Txn|Transaction`)
)

// funcFacts is one function's direct needs and the names it mentions
// (candidate callees).
type funcFacts struct {
	needs
	mentions map[string]bool
}

// suiteSource maps function (and method) names in the suite's test files
// to their facts. Methods are keyed by method name alone: suites call
// them through a receiver whose type is not resolved here.
type suiteSource map[string]*funcFacts

// parseSuiteDir reads every *_test.go in dir that builds without extra tags.
func parseSuiteDir(dir string) (suiteSource, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	files := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		files[filepath.Base(p)] = b
	}
	return parseSuite(files)
}

// parseSuite is parseSuiteDir over file contents by name.
func parseSuite(files map[string][]byte) (suiteSource, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	src := suiteSource{}
	fset := token.NewFileSet()
	for _, n := range names {
		f, err := parser.ParseFile(fset, n, files[n], parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if !buildsByDefault(f) {
			continue
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				src.add(fd.Name.Name, factsOf(fd.Body))
			}
		}
	}
	return src, nil
}

func (s suiteSource) add(name string, f *funcFacts) {
	old, ok := s[name]
	if !ok {
		s[name] = f
		return
	}
	old.Docker, old.Security, old.Transactions = old.Docker || f.Docker, old.Security || f.Security, old.Transactions || f.Transactions
	for m := range f.mentions {
		old.mentions[m] = true
	}
}

// buildsByDefault reports whether a file's //go:build line (if any) holds
// with no extra tags (the suite puts its clustered and load-manager
// tests behind tags).
func buildsByDefault(f *ast.File) bool {
	for _, cg := range f.Comments {
		if cg.Pos() > f.Package {
			break
		}
		for _, c := range cg.List {
			if !constraint.IsGoBuild(c.Text) {
				continue
			}
			expr, err := constraint.Parse(c.Text)
			if err != nil {
				return false
			}
			return expr.Eval(func(tag string) bool {
				return tag == runtime.GOOS || tag == runtime.GOARCH || tag == "gc" || tag == "unix" && runtime.GOOS != "windows" || strings.HasPrefix(tag, "go1.")
			})
		}
	}
	return true
}

func factsOf(body ast.Node) *funcFacts {
	f := &funcFacts{mentions: map[string]bool{}}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			f.mentions[n.Name] = true
			f.Docker = f.Docker || dockerIdents[n.Name]
			f.Security = f.Security || securityIdents[n.Name]
			f.Transactions = f.Transactions || txnIdents[n.Name]
		case *ast.BasicLit:
			if n.Kind == token.STRING {
				if s, err := strconv.Unquote(n.Value); err == nil && securityLiteral.MatchString(s) {
					f.Security = true
				}
			}
		}
		return true
	})
	return f
}

// needsOf is what test needs: its own facts and those of every suite
// function it reaches through calls (bounded by the suite's size).
func (s suiteSource) needsOf(test string) needs {
	var n needs
	n.Transactions = txnName.MatchString(test)
	seen := map[string]bool{test: true}
	queue := []string{test}
	for len(queue) > 0 {
		f := s[queue[0]]
		queue = queue[1:]
		if f == nil {
			continue
		}
		n.Docker, n.Security, n.Transactions = n.Docker || f.Docker, n.Security || f.Security, n.Transactions || f.Transactions
		for m := range f.mentions {
			if !seen[m] && s[m] != nil {
				seen[m] = true
				queue = append(queue, m)
			}
		}
	}
	return n
}

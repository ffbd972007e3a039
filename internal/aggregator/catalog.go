package aggregator

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/yosida95/uritemplate/v3"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/trust"
)

// kind is one of the lists a server offers.
type kind int

const (
	kindTools kind = iota
	kindPrompts
	kindResources
	kindTemplates
	numKinds
)

// kinds describes each list: the method that reads it, the member of the result that holds
// it, and the notification that says it changed.
var kinds = [numKinds]struct{ method, field, changed string }{
	kindTools:     {"tools/list", "tools", "notifications/tools/list_changed"},
	kindPrompts:   {"prompts/list", "prompts", "notifications/prompts/list_changed"},
	kindResources: {"resources/list", "resources", "notifications/resources/list_changed"},
	kindTemplates: {"resources/templates/list", "resourceTemplates", "notifications/resources/list_changed"},
}

// catalog is an immutable snapshot of what the servers offer. Lookups read the current
// snapshot without locks; changes build a new one.
//
// Tools and prompts are exposed as key+separator+name. Resources and templates keep their URIs
// (they are addresses, not names); the catalog remembers which server owns each.
type catalog struct {
	servers []*server // the servers it was built from, in key order
	sep     string
	era     era.Era // the client's era: its schema checked the definitions, and its lists are in its shape

	tools map[string]entry // by exposed name
	// bare are the tools by the name their server gives them, for an MCP App's own calls
	// ("the name as the server declared it"): only names exactly one server lists.
	bare  map[string]entry
	order []entry // tools: servers in key order, each server's tools in its order
	// hidden are the tools the configuration's filters hide, by exposed name: why, for the
	// error a call to one gets.
	hidden  map[string]string
	prompts map[string]entry // by exposed name

	resources     map[string]*server // by URI
	templates     []template         // in the order of the list
	templateOwner map[string]*server // by URI template, as written
	schemes       map[string][]*server
	// instructions are the servers' full instructions, by their URI of ours
	// (instructions.go): resources the aggregator answers itself.
	instructions map[string]string

	lists [numKinds]json.RawMessage // the encoded list results
	hints [numKinds]era.CacheHint   // their cache hints, for a modern client

	// warnings are the collisions of resources and templates between servers: each names
	// both servers and which one wins.
	warnings []string
	// gone are the tools and prompts (by kind, then exposed name) that a server listed and
	// lists no more, with its key: a call for one says so (publish keeps them).
	gone [numKinds]map[string]string

	// withheld are the definitions that break the schema of the era, or differ from the lock
	// with --pinned (withheld.go), in the order of the servers and their lists; withheldBy
	// finds them by kind and exposed name (tools, prompts) or URI (resources, templates).
	withheld   []withheldDef
	withheldBy [numKinds]map[string]withheldDef
	// silenced are the servers whose instructions --pinned withholds (withInstructions).
	silenced map[*server]bool
	// findings are the hidden characters in what the servers tell the model (trust.go), in
	// the order of the servers.
	findings []trust.Finding
	search   searchState // --tool-search: the index and list, built at first use (toolsearch.go)
}

// entry is one exposed tool or prompt: who owns it and its definition under the exposed name.
type entry struct {
	exposed  string
	original string
	quoted   []byte // original as a JSON string, for forwarded requests
	server   *server
	def      json.RawMessage
}

// template is a resource template of a server, with the expression that matches its URIs.
type template struct {
	server *server
	uri    string
	re     *regexp.Regexp // nil when the template does not parse
}

// buildCatalog builds the catalog of servers (in key order) for a client of the legacy era
// (every protocol version up to 2025-11-25): see buildCatalogFor.
func buildCatalog(servers []*server, sep string) (*catalog, error) {
	return buildCatalogFor(servers, sep, era.Legacy)
}

// buildCatalogFor builds the catalog of servers (in key order) for a client of clientEra. Two
// tools, or two prompts, that would get the same exposed name are an error naming both. A
// resource URI or template that two servers list goes to the server whose key sorts first;
// the other's entry is left out of the list, with a warning. A definition that breaks the
// schema of clientEra, or with --pinned differs from the lock, is withheld (withheld.go): it is
// left out of the lists, and takes no part in collisions. The hidden characters in what the
// servers tell the model are noted (trust.go).
func buildCatalogFor(servers []*server, sep string, clientEra era.Era) (*catalog, error) {
	c := &catalog{
		servers:       servers,
		sep:           sep,
		era:           clientEra,
		tools:         map[string]entry{},
		bare:          map[string]entry{},
		hidden:        map[string]string{},
		prompts:       map[string]entry{},
		resources:     map[string]*server{},
		templateOwner: map[string]*server{},
		schemes:       map[string][]*server{},
	}
	var problems []string
	var defs [numKinds][]json.RawMessage
	for _, s := range servers {
		bad := screen(s, clientEra)
		for _, named := range []struct {
			k      kind
			what   string
			byName map[string]entry
		}{{kindTools, "tool", c.tools}, {kindPrompts, "prompt", c.prompts}} {
			k, what, byName := named.k, named.what, named.byName
			for i, def := range s.lists[k] {
				e, err := expose(s, def, sep)
				if w, withheld := bad[k][i]; withheld && err != nil {
					c.withhold(w) // no usable name: the schema says what is wrong
					continue
				}
				if err != nil {
					s.log.Warn(fmt.Sprintf("%s #%d of the list is ignored: %v", what, i+1, err))
					continue
				}
				if k == kindTools {
					if why, hide := s.filter.Hidden(e.original); hide {
						c.hidden[e.exposed] = why
						continue
					}
					var why string
					if e.def, why = era.Tool(s.side().era(), clientEra, e.def); why != "" {
						c.hidden[e.exposed] = why
						continue
					}
				}
				if w, withheld := bad[k][i]; withheld {
					c.withhold(w)
					continue
				}
				if other, dup := byName[e.exposed]; dup {
					problems = append(problems, fmt.Sprintf("the %s name %q would be exposed twice: for %s %q of server %q and for %s %q of server %q; "+
						"rename one of the server keys or choose another --separator", what, e.exposed, what, other.original, other.server.key, what, e.original, s.key))
					continue
				}
				byName[e.exposed] = e
				defs[k] = append(defs[k], e.def)
				if k == kindTools {
					c.order = append(c.order, e)
					if _, twice := c.bare[e.original]; twice {
						e.server = nil // two servers list it: not reachable by its bare name
					}
					c.bare[e.original] = e
				}
			}
		}
		for i, def := range s.lists[kindResources] {
			if w, withheld := bad[kindResources][i]; withheld {
				c.withhold(w)
				continue
			}
			uri, err := stringMember(def, "uri")
			if err != nil {
				s.log.Warn(fmt.Sprintf("resource #%d of the list is ignored: %v", i+1, err))
				continue
			}
			c.addScheme(uri, s) // a collision still means both use the scheme
			if owner, dup := c.resources[uri]; dup && owner != s {
				c.warnings = append(c.warnings, fmt.Sprintf("the resource %q is listed by servers %q and %q; %q serves it (a URI that two servers list goes to the server whose key sorts first)",
					uri, owner.key, s.key, owner.key))
				continue
			}
			c.resources[uri] = s
			defs[kindResources] = append(defs[kindResources], def)
		}
		for i, def := range s.lists[kindTemplates] {
			if w, withheld := bad[kindTemplates][i]; withheld {
				c.withhold(w)
				continue
			}
			uri, err := stringMember(def, "uriTemplate")
			if err != nil {
				s.log.Warn(fmt.Sprintf("resource template #%d of the list is ignored: %v", i+1, err))
				continue
			}
			c.addScheme(uri, s)
			if owner, dup := c.templateOwner[uri]; dup && owner != s {
				c.warnings = append(c.warnings, fmt.Sprintf("the resource template %q is listed by servers %q and %q; %q serves it (a template that two servers list goes to the server whose key sorts first)",
					uri, owner.key, s.key, owner.key))
				continue
			}
			t := template{server: s, uri: uri}
			if parsed, err := uritemplate.New(uri); err == nil {
				t.re = parsed.Regexp()
			} else {
				s.log.Warn(fmt.Sprintf("resource template %q is not a valid URI template (%v): resources/read cannot match URIs against it", uri, err))
			}
			c.templateOwner[uri] = s
			c.templates = append(c.templates, t)
			defs[kindTemplates] = append(defs[kindTemplates], def)
		}
		if w, withheld := bad[kindInstructions][0]; withheld {
			c.withhold(w)
		}
		c.findings = append(c.findings, s.findings()...)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	own, texts := instructionResources(c.withInstructions())
	defs[kindResources] = append(defs[kindResources], own...)
	c.instructions = texts
	for k := range numKinds {
		c.lists[k] = encodeList(kinds[k].field, defs[k])
		c.hints[k] = listHint(servers, k)
		// A modern client's lists carry their envelope: made once here, so that listing stays
		// a copy.
		c.lists[k] = era.List(clientEra, c.lists[k], c.hints[k])
	}
	return c, nil
}

// expose renames the tool or prompt def of s to key+sep+name.
func expose(s *server, def json.RawMessage, sep string) (entry, error) {
	e := entry{server: s}
	var err error
	if _, e.original, err = renameTool(def, ""); err != nil {
		return e, err
	}
	e.exposed = s.key + sep + e.original
	e.quoted, _ = json.Marshal(e.original) // a string always encodes
	e.def, _, _ = renameTool(def, e.exposed)
	return e, nil
}

// addScheme records that s uses the URI scheme of uri.
func (c *catalog) addScheme(uri string, s *server) {
	scheme := uriScheme(uri)
	if scheme == "" {
		return
	}
	list := c.schemes[scheme]
	if len(list) == 0 || list[len(list)-1] != s {
		c.schemes[scheme] = append(list, s)
	}
}

// uriScheme is the scheme of uri (RFC 3986: a letter, then letters, digits, +, - and .),
// lower-cased; "" when it has none.
func uriScheme(uri string) string {
	i := strings.IndexByte(uri, ':')
	if i <= 0 {
		return ""
	}
	for j := 0; j < i; j++ {
		c := uri[j]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (j == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return ""
		}
	}
	return strings.ToLower(uri[:i])
}

// resourceOwner finds the server that serves uri: the one that lists it; else the first
// whose template matches it (in the order of the template list); else the only server that
// offers resources at all, or the only one whose URIs use its scheme. Otherwise it returns
// nil and why.
func (c *catalog) resourceOwner(uri string) (*server, string) {
	if s, ok := c.resources[uri]; ok {
		return s, ""
	}
	for _, t := range c.templates {
		if t.re != nil && t.re.MatchString(uri) {
			return t.server, ""
		}
	}
	var offering []*server
	for _, s := range c.servers {
		if s.offers("resources") {
			offering = append(offering, s)
		}
	}
	switch {
	case len(offering) == 1:
		return offering[0], ""
	case len(offering) == 0:
		return nil, "no server offers resources"
	}
	users := c.schemes[uriScheme(uri)]
	if len(users) == 1 {
		return users[0], ""
	}
	if len(users) == 0 {
		return nil, fmt.Sprintf("no server lists it or a template that matches it, and no server uses URIs of its scheme (servers with resources: %s)", keyList(offering))
	}
	return nil, fmt.Sprintf("no server lists it or a template that matches it, and several servers use URIs of its scheme (%s)", keyList(users))
}

// noteGone records in c the tools and prompts of old that c has no more and whose server is
// still listed, with those old had recorded that c has not again.
func (c *catalog) noteGone(old *catalog) {
	if old == nil {
		return
	}
	listed := map[string]bool{}
	for _, s := range c.servers {
		listed[s.key] = true
	}
	for _, k := range []kind{kindTools, kindPrompts} {
		now, before := c.tools, old.tools
		if k == kindPrompts {
			now, before = c.prompts, old.prompts
		}
		add := func(name, key string) {
			if _, back := now[name]; back || !listed[key] {
				return
			}
			if c.gone[k] == nil {
				c.gone[k] = map[string]string{}
			}
			c.gone[k][name] = key
		}
		for name, key := range old.gone[k] {
			add(name, key)
		}
		for name, e := range before {
			add(name, e.server.key)
		}
	}
}

// listHint is the cache hint of the aggregator's list k: that of the servers' lists merged. No
// server: public and stale at once. Called under roster.mu.
func listHint(servers []*server, k kind) era.CacheHint {
	h, first := era.CacheHint{Public: true}, true
	for _, s := range servers {
		if !s.offersList(k) {
			continue
		}
		if first {
			h, first = s.hints[k], false
			continue
		}
		h = h.Merge(s.hints[k])
	}
	return h
}

// named finds the tool or prompt (k) of the exposed name; a tool also by the name its server
// declared when exactly one server lists it (an MCP App calls its server's tools so).
func (c *catalog) named(k kind, name []byte) (entry, bool) {
	if k == kindPrompts {
		e, ok := c.prompts[string(name)]
		return e, ok
	}
	if e, ok := c.tools[string(name)]; ok {
		return e, true
	}
	e, ok := c.bare[string(name)]
	return e, ok && e.server != nil
}

// inputTarget is the server a request that may be answered with input_required (inputMethods)
// goes to: the owner of its tool, prompt or resource; nil when none.
func (c *catalog) inputTarget(method string, params json.RawMessage) *server {
	switch method {
	case "tools/call", "prompts/get":
		name, _ := rawjson.StringMember(params, "name")
		k := kindTools
		if method == "prompts/get" {
			k = kindPrompts
		}
		e, _ := c.named(k, []byte(name))
		return e.server
	case "resources/read":
		uri, _ := rawjson.StringMember(params, "uri")
		s, _ := c.resourceOwner(uri)
		return s
	}
	return nil
}

func keyList(servers []*server) string {
	q := make([]string, len(servers))
	for i, s := range servers {
		q[i] = fmt.Sprintf("%q", s.key)
	}
	return strings.Join(q, ", ")
}

// apiToolName reports whether name is what the Anthropic and OpenAI APIs accept as a tool
// name, ^[A-Za-z0-9_-]{1,64}$ (see docs: clients that call those APIs withhold or drop tools
// with other names). A loop, not a regular expression: that one, with its counted repeat,
// costs every process of the program 60 KB at start-up.
func apiToolName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// rejectedNames lists the exposed names that API-backed clients would reject.
func (c *catalog) rejectedNames() []string {
	var bad []string
	for _, t := range c.order {
		if !apiToolName(t.exposed) {
			bad = append(bad, t.exposed)
		}
	}
	return bad
}

// nameWarning is the start-up warning about names that API-backed clients reject, with what to
// do about it; "" when every name is accepted.
func nameWarning(c *catalog, sep string) string {
	bad := c.rejectedNames()
	if len(bad) == 0 {
		return ""
	}
	fix := "start with --separator __"
	for _, t := range c.order {
		if !apiToolName(t.server.key + "__" + t.original) {
			fix = "use server keys of letters, digits, _ and - (and --separator __), keeping key and tool name within 64 characters"
			break
		}
	}
	if sep == "__" || sep == "_" || sep == "-" {
		fix = "use server keys of letters, digits, _ and -, keeping key and tool name within 64 characters"
	}
	shown := bad
	if len(shown) > 10 {
		shown = shown[:10]
	}
	more := ""
	if len(bad) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(bad)-len(shown))
	}
	return fmt.Sprintf("%d tool names have characters other than letters, digits, _ and -, or are longer than 64 characters, "+
		"and clients that use the Anthropic or OpenAI APIs (Claude Desktop, claude.ai, Cursor, ChatGPT) reject them: %s%s; to avoid it, %s",
		len(bad), quoteList(shown), more, fix)
}

// stringMember returns the string value of the member key of the definition obj.
func stringMember(obj json.RawMessage, key string) (string, error) {
	start, end, err := memberValue(obj, key)
	if err != nil {
		return "", err
	}
	v, ok := rawjson.Decode(obj[start:end])
	if !ok {
		return "", fmt.Errorf("%q is not a string: %.80s", key, obj[start:end])
	}
	return v, nil
}

// memberValue finds the byte range of the value of the top-level member key of the definition
// obj; when key occurs more than once, the last one, which is what the server's JSON decoder
// uses too.
func memberValue(obj json.RawMessage, key string) (start, end int, err error) {
	if start, end, ok := rawjson.Member(obj, key); ok {
		return start, end, nil
	}
	if !rawjson.Object(obj, func([]byte, int, int) bool { return true }) || !json.Valid(obj) {
		return 0, 0, fmt.Errorf("not a JSON object: %.80s", obj)
	}
	return 0, 0, fmt.Errorf("it has no %q", key)
}

// renameTool returns the tool or prompt definition obj (a JSON object) with its "name"
// replaced by name, and the old name. Everything else is kept byte for byte, in order.
func renameTool(obj json.RawMessage, name string) (json.RawMessage, string, error) {
	start, end, err := memberValue(obj, "name")
	if err != nil {
		return nil, "", err
	}
	old, ok := rawjson.Decode(obj[start:end])
	if !ok {
		return nil, "", fmt.Errorf("its name is not a string: %s", obj[start:end])
	}
	quoted, _ := json.Marshal(name) // a string always encodes
	return rawjson.Replace(obj, start, end, quoted), old, nil
}

// encodeList encodes {"<field>":[...]} from raw definitions.
func encodeList(field string, defs []json.RawMessage) json.RawMessage {
	n := len(`{"":[]}`) + len(field)
	for _, d := range defs {
		n += len(d) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"`+field+`":[`...)
	for i, d := range defs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, d...)
	}
	return append(b, "]}"...)
}

// quoteList quotes names for messages.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

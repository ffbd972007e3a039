package aggregator

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// A server's "instructions" (in its answer to initialize) tell the model how to use its tools.
// The client gets one text built from every server's, in key order, each under its key with a
// line that says how its tools and prompts are named. The text is fixed at the client's
// initialize. Each server's full text is also a resource of the aggregator's own,
// mcp-simple-aggregator://instructions/<key>, answered here before any routing, so that a
// client that cuts the text loses nothing.

// instructionsPrefix starts the URIs of the servers' full instructions.
const instructionsPrefix = "mcp-simple-aggregator://instructions/"

// instructionLimits are the clients known to cut a server's instructions, by clientInfo.name,
// with their limit in characters (UTF-16 code units, as JavaScript counts them). Claude Code
// cuts each server's instructions at 2,048 characters, silently (docs/passthrough.md, "Instructions",
// says what the client then gets).
var instructionLimits = map[string]int{
	"claude-code": 2048,
}

// instructionLimit is the limit of the client named name; 0 for none known.
func instructionLimit(name string) int { return instructionLimits[strings.ToLower(name)] }

// instructionsURI is the URI of the full instructions of the server key: the key
// percent-encoded (everything but letters, digits, - . _ ~).
func instructionsURI(key string) string {
	var b strings.Builder
	b.WriteString(instructionsPrefix)
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// instructionsPreamble opens the combined instructions.
const instructionsPreamble = "mcp-simple-aggregator serves the tools, prompts and resources of several MCP servers as one. " +
	"Their instructions follow, each between <instructions server=\"<key>\"> and </instructions>; each server's full text is also the resource " + instructionsPrefix + "<key>."

// combineInstructions builds the client's instructions from servers (in key order): "" when
// none has any. With limit > 0 the text is fitted to limit characters (see fit).
func combineInstructions(servers []*server, sep string, limit int) string {
	// Each text between tags of its own: servers write Markdown headings of every level, so
	// headings could not tell where one server's text ends.
	var headers, texts []string
	var keys []string
	for _, s := range servers {
		text := strings.TrimSpace(s.instructions)
		if text == "" {
			continue
		}
		keys = append(keys, s.key)
		headers = append(headers, fmt.Sprintf("<instructions server=%q>\nIts tools and prompts are named %q; its resources keep their URIs.\n", s.key, s.key+sep+"<name>"))
		texts = append(texts, text)
	}
	if len(texts) == 0 {
		return ""
	}
	if limit > 0 {
		texts = fit(keys, headers, texts, limit)
	}
	var b strings.Builder
	b.WriteString(instructionsPreamble)
	for i := range texts {
		b.WriteString("\n\n")
		b.WriteString(headers[i])
		b.WriteString(texts[i])
		b.WriteString(instructionsEnd)
	}
	return b.String()
}

// instructionsEnd closes each server's instructions.
const instructionsEnd = "\n</instructions>"

// fit cuts texts so that the preamble, the headers and the texts together stay within limit,
// fairly: every header counts, texts shorter than an equal share of what is left stay whole,
// and the longer ones share the rest equally (max-min fairness), each cut at a paragraph or
// sentence boundary and marked with where its full text is. Every server keeps its opening.
func fit(keys, headers, texts []string, limit int) []string {
	fixed := length(instructionsPreamble)
	total := fixed
	for i := range texts {
		fixed += 2 + length(headers[i]) + length(instructionsEnd)
		total += 2 + length(headers[i]) + length(texts[i]) + length(instructionsEnd)
	}
	if total <= limit {
		return texts
	}
	avail := max(limit-fixed, 0)
	order := make([]int, len(texts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return length(texts[a]) - length(texts[b]) })
	share := make([]int, len(texts))
	left := avail
	for n, i := range order {
		equal := left / (len(order) - n)
		if l := length(texts[i]); l <= equal {
			share[i] = l
			left -= l
			continue
		}
		for _, j := range order[n:] {
			share[j] = equal
		}
		break
	}
	out := make([]string, len(texts))
	for i, t := range texts {
		if share[i] >= length(t) {
			out[i] = t
			continue
		}
		marker := "\n[Cut to fit the client's limit; the full text is the resource " + instructionsURI(keys[i]) + "]"
		out[i] = cut(t, share[i]-length(marker)) + marker
	}
	return out
}

// cut returns the beginning of text of at most n characters (UTF-16 code units), ending at a
// paragraph break when one is in the second half, else at the end of a sentence or a word in
// the last two thirds, else where the limit falls (never inside a character).
func cut(text string, n int) string {
	if n <= 0 {
		return ""
	}
	end, units := 0, 0
	for i, r := range text {
		w := 1
		if r > 0xFFFF {
			w = 2
		}
		if units+w > n {
			break
		}
		units += w
		end = i + utf8.RuneLen(r)
	}
	head := text[:end]
	if end == len(text) {
		return head
	}
	if i := strings.LastIndex(head, "\n\n"); i >= len(head)/2 {
		return strings.TrimRight(head[:i], " \n")
	}
	best := -1
	for _, stop := range []string{". ", ".\n", "! ", "? ", "!\n", "?\n", "。"} {
		if i := strings.LastIndex(head, stop); i >= 0 {
			best = max(best, i+len(strings.TrimRight(stop, " \n")))
		}
	}
	if best >= len(head)/3 {
		return head[:best]
	}
	if i := strings.LastIndexAny(head, " \n\t"); i >= len(head)/3 {
		return strings.TrimRight(head[:i], " \n\t")
	}
	return head
}

// length counts characters as JavaScript does (UTF-16 code units): the clients that cut are
// written in it.
func length(s string) int {
	n := 0
	for _, r := range s {
		if r > 0xFFFF {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// instructionResources are the list entries of the servers' full instructions, for
// resources/list, and their texts by URI.
func instructionResources(servers []*server) (defs []json.RawMessage, texts map[string]string) {
	texts = map[string]string{}
	for _, s := range servers {
		if strings.TrimSpace(s.instructions) == "" {
			continue
		}
		uri := instructionsURI(s.key)
		def := marshal(struct {
			URI         string `json:"uri"`
			Name        string `json:"name"`
			Title       string `json:"title"`
			Description string `json:"description"`
			MimeType    string `json:"mimeType"`
		}{uri, "instructions of " + s.key, fmt.Sprintf("Instructions of the server %q", s.key),
			fmt.Sprintf("The full instructions of the server %q, as it gave them in its answer to initialize.", s.key), "text/markdown"})
		defs = append(defs, def)
		texts[uri] = s.instructions
	}
	return defs, texts
}

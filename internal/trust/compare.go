package trust

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Status is how a definition stands against the lock.
type Status string

const (
	// Changed: pinned under its name, and some member differs (Difference.Changes).
	Changed Status = "changed"
	// New: the lock has no definition of its kind under its name, although it has its
	// server. A renamed tool is new: its pin is under the old name (Difference.SameAs names
	// it when the definition is otherwise the same).
	New Status = "new"
	// Unpinned: the lock has no entry for its server at all.
	Unpinned Status = "unpinned"
	// Removed: pinned, and no longer listed. Not an error, and nothing to withhold.
	Removed Status = "removed"
)

// Difference is one definition that differs from the lock.
type Difference struct {
	Server string `json:"server"`
	Kind   Kind   `json:"kind"`
	// Name is the tool's or prompt's name as its server lists it, the template's URI
	// template; "" for the instructions and for a definition without a name.
	Name string `json:"name,omitempty"`
	// Index is its place in its server's list (from 0); -1 when it was Removed.
	Index  int    `json:"index"`
	Status Status `json:"status"`
	// Changes are its members that differ, for Changed.
	Changes []Change `json:"changes,omitempty"`
	// SameAs is, for New, the pinned name of a definition of its kind that is the same in
	// every member: the tool renamed (or copied) since it was pinned.
	SameAs string `json:"sameAs,omitempty"`
}

// Withheld reports whether serving with --pinned withholds the definition: every difference
// but a removal.
func (d Difference) Withheld() bool { return d.Status != Removed }

// String is the line that names the difference on stderr, to the client and in check:
// `server "github": tool "create_issue" differs from the lock: description changed, inputSchema property "labels" added`.
func (d Difference) String() string {
	return fmt.Sprintf("server %q: %s %s", d.Server, definitionName(d.Kind, d.Name, d.Index), d.Summary())
}

// Summary is what happened to the definition, without naming it: `differs from the lock:
// description changed`, `is not in the lock`, `is not in the lock (it is the pinned tool "a"
// under another name)`, `is not in the lock, which has no entry for its server`, `is pinned
// but no longer listed`; of the instructions, `differ from the lock`, and so on.
func (d Difference) Summary() string {
	if d.Kind == Instructions {
		switch d.Status {
		case Changed:
			return "differ from the lock"
		case New:
			return "are not in the lock"
		case Unpinned:
			return "are not in the lock, which has no entry for their server"
		default:
			return "are pinned but no longer given"
		}
	}
	switch d.Status {
	case Changed:
		parts := make([]string, len(d.Changes))
		for i, c := range d.Changes {
			parts[i] = c.String()
		}
		return "differs from the lock: " + strings.Join(parts, ", ")
	case New:
		if d.SameAs != "" {
			return fmt.Sprintf("is not in the lock (it is the pinned %s %q under another name)", d.Kind, Visible(d.SameAs))
		}
		return "is not in the lock"
	case Unpinned:
		return "is not in the lock, which has no entry for its server"
	default:
		return "is pinned but no longer listed"
	}
}

// Change is one member of a definition that differs from the lock.
type Change struct {
	// Member is its JSON Pointer in the definition, as in the lock: "/description",
	// "/inputSchema/properties/path", "/annotations/readOnlyHint", "/arguments/city"
	// (arguments by name); "" for the whole of a definition that is not an object, or of the
	// instructions.
	Member string `json:"member"`
	// Op is "added", "removed" or "changed".
	Op string `json:"op"`
}

// String says it in words: `description changed`, `inputSchema property "path" added`,
// `annotation "readOnlyHint" removed`, `argument "city" added`, `arguments reordered`.
func (c Change) String() string {
	t := splitPointer(c.Member)
	var what string
	switch {
	case len(t) == 0:
		what = "text"
	case len(t) == 1 && t[0] == "arguments" && c.Op == "changed":
		return "arguments reordered"
	case len(t) == 1:
		what = t[0]
	case len(t) == 3 && t[1] == "properties" && (t[0] == "inputSchema" || t[0] == "outputSchema"):
		what = fmt.Sprintf("%s property %q", t[0], Visible(t[2]))
	case len(t) == 2 && t[0] == "annotations":
		what = fmt.Sprintf("annotation %q", Visible(t[1]))
	case len(t) == 2 && t[0] == "arguments":
		what = fmt.Sprintf("argument %q", Visible(t[1]))
	default:
		what = fmt.Sprintf("%s %q", t[0], Visible(strings.Join(t[1:], "/")))
	}
	return what + " " + c.Op
}

// Compare compares what s lists now with its server's entry in the lock, and returns each
// definition that differs (tools, prompts, resource templates, the instructions; resources
// are not pinned), in the order of the lists, each kind's removed ones after its listed ones.
// Unchanged definitions are not returned: a server whose definitions are all as pinned has
// no difference. With no entry for the server, every definition is Unpinned.
func (l *Lock) Compare(s *Server) []Difference {
	e := l.servers[s.key]
	var out []Difference
	for _, k := range append(slices.Clone(pinned), Instructions) {
		listed := map[string]bool{}
		for _, d := range s.defs {
			if d.kind != k {
				continue
			}
			dec := d.read()
			diff := Difference{Server: s.key, Kind: k, Name: dec.name, Index: d.index}
			switch {
			case e == nil:
				diff.Status = Unpinned
			case k == Instructions:
				if e.Instructions == "" {
					diff.Status = New
				} else if e.Instructions != d.pins()[""] {
					diff.Status, diff.Changes = Changed, []Change{{Member: "", Op: "changed"}}
				}
			case dec.nameless:
				diff.Status = New
			default:
				listed[dec.name] = true
				p, ok := e.of(k)[dec.name]
				if !ok {
					diff.Status, diff.SameAs = New, sameAs(e.of(k), d.pins())
				} else if changes := changed(p, d.pins()); len(changes) > 0 {
					diff.Status, diff.Changes = Changed, changes
				}
			}
			if diff.Status != "" {
				out = append(out, diff)
			}
		}
		if e == nil {
			continue
		}
		if k == Instructions {
			if e.Instructions != "" && !slices.ContainsFunc(s.defs, func(d *definition) bool { return d.kind == Instructions }) {
				out = append(out, Difference{Server: s.key, Kind: k, Index: -1, Status: Removed})
			}
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(e.of(k))) {
			if !listed[name] {
				out = append(out, Difference{Server: s.key, Kind: k, Name: name, Index: -1, Status: Removed})
			}
		}
	}
	return out
}

// sameAs is the first name (sorted) of a pin with exactly the members m.
func sameAs(pins map[string]pin, m map[string]string) string {
	for _, name := range slices.Sorted(maps.Keys(pins)) {
		if maps.Equal(pins[name], m) {
			return name
		}
	}
	return ""
}

// changed lists the members of now that differ from the pin was, sorted by pointer, in the
// fewest words: a member added or removed as a whole is one change (not one per member
// inside it), and a member that stands for its parts (an empty object, the order of a
// prompt's arguments) is not named beside a change of its parts.
func changed(was pin, now map[string]string) []Change {
	var raw []Change
	for _, m := range slices.Sorted(maps.Keys(was)) {
		if d, ok := now[m]; !ok {
			raw = append(raw, Change{Member: m, Op: "removed"})
		} else if d != was[m] {
			raw = append(raw, Change{Member: m, Op: "changed"})
		}
	}
	for m := range now {
		if _, ok := was[m]; !ok {
			raw = append(raw, Change{Member: m, Op: "added"})
		}
	}
	slices.SortFunc(raw, func(a, b Change) int { return strings.Compare(a.Member, b.Member) })

	// A top-level member that one side has no part of at all was added or removed whole.
	has := func(p pin, top string) bool {
		for m := range p {
			if m == top || strings.HasPrefix(m, top+"/") {
				return true
			}
		}
		return false
	}
	var out []Change
	whole := map[string]bool{}
	for _, c := range raw {
		top := topMember(c.Member)
		switch {
		case whole[top]:
			continue
		case c.Op == "added" && !has(was, top), c.Op == "removed" && !has(now, top):
			whole[top] = true
			out = append(out, Change{Member: top, Op: c.Op})
			continue
		}
		// A member with parts changed beside it stands for them: an empty object that got
		// members, the arguments' order when one was added or removed.
		parts := slices.ContainsFunc(raw, func(o Change) bool {
			return o.Op != "changed" && strings.HasPrefix(o.Member, c.Member+"/")
		})
		if parts {
			continue
		}
		out = append(out, c)
	}
	return out
}

// topMember is the first token of a member's pointer, as a pointer: "/inputSchema" of
// "/inputSchema/properties/path".
func topMember(m string) string {
	if m == "" {
		return ""
	}
	if i := strings.IndexByte(m[1:], '/'); i >= 0 {
		return m[:i+1]
	}
	return m
}

func unescapeToken(t string) string {
	if !strings.Contains(t, "~") {
		return t
	}
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
}

// splitPointer is the tokens of a JSON Pointer.
func splitPointer(p string) []string {
	if p == "" {
		return nil
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		tokens[i] = unescapeToken(t)
	}
	return tokens
}

package trust

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Class is a kind of hidden character: one that renders as nothing, or that reorders the
// text around it, so that what a person reviewing a definition sees is not what the model
// reads.
type Class string

const (
	// Tag characters (U+E0000 to U+E007F) mirror ASCII invisibly: a model reads them as
	// text ("ASCII smuggling"). Allowed only in the three flags Unicode recommends (England,
	// Scotland, Wales), whose tags spell gbeng, gbsct and gbwls after U+1F3F4.
	Tag Class = "tag"
	// Bidi are the bidirectional controls (U+202A to U+202E, U+2066 to U+2069, U+200E,
	// U+200F, U+061C): they reorder what is displayed ("Trojan Source", CVE-2021-42574), or
	// are invisible marks. Never allowed.
	Bidi Class = "bidi"
	// ZeroWidth are U+200B, U+200C, U+200D, U+2060 and U+FEFF. Allowed: a zero-width joiner
	// inside an emoji sequence (between pictographs, as Unicode's grapheme rules join them),
	// and a joiner or non-joiner after a letter or mark of the scripts that use them to
	// choose a letter's form (Arabic, Syriac, N'Ko, Mongolian and the Brahmic scripts of
	// South Asia), before another or at the end of a word.
	ZeroWidth Class = "zero-width"
	// VariationSelector are U+FE00 to U+FE0F, U+E0100 to U+E01EF and the Mongolian free
	// variation selectors: one after another character changes its glyph; a run of them
	// after one character carries bytes ("emoji smuggling"). Allowed: one U+FE0E or U+FE0F
	// directly after an emoji, one of the others directly after a Han ideograph (ideographic
	// variation sequences), and the Mongolian ones (and U+180E) directly after a Mongolian
	// letter.
	VariationSelector Class = "variation-selector"
	// Control are the C0 and C1 control characters (U+0000 to U+001F, U+007F to U+009F) but
	// tab, line feed and carriage return: an escape sequence (ESC, U+001B) can hide or
	// rewrite text in a terminal. Never allowed.
	Control Class = "control"
	// Format are the other format characters (general category Cf: the soft hyphen, the
	// invisible mathematical operators, interlinear annotations, ...) and the other default
	// ignorable code points (the Hangul fillers, U+034F, the Khmer inherent vowels, the
	// reserved ones): they render as nothing. Never allowed.
	Format Class = "format"
)

// Finding is one run of hidden characters of one class in a text the model reads.
type Finding struct {
	Server string `json:"server"`
	Kind   Kind   `json:"kind"`
	// Name names the definition: see Difference.Name. "" for the instructions.
	Name  string `json:"name,omitempty"`
	Index int    `json:"index"`
	// Pointer is the JSON Pointer of the text within the definition ("" for the
	// instructions, and for the name of a member it is the pointer of that member).
	Pointer string `json:"pointer"`
	// Key says that the characters are in a member's name (a property of a schema, say): the
	// last token of Pointer.
	Key bool `json:"key,omitempty"`
	// Offset is where the run starts in the text, in characters from its start (0).
	Offset int   `json:"offset"`
	Class  Class `json:"class"`
	// Count is the run's length in characters; CodePoints are its distinct characters in
	// order of appearance.
	Count      int         `json:"count"`
	CodePoints []CodePoint `json:"codePoints"`
	// Text is what a run of tag characters spells (they mirror ASCII), so that the user
	// sees what was hidden; "" for the other classes.
	Text string `json:"text,omitempty"`
}

// String says where it is and what it is, with no hidden character in it:
// `tool "search" /inputSchema/properties/q/description: 3 zero-width characters (U+200B) at character 18`.
func (f Finding) String() string {
	var b strings.Builder
	if f.Kind == Instructions {
		b.WriteString("instructions")
	} else {
		b.WriteString(definitionName(f.Kind, f.Name, f.Index))
		b.WriteString(" ")
		b.WriteString(Visible(f.Pointer))
	}
	if f.Key {
		b.WriteString(" (in the member's name)")
	}
	fmt.Fprintf(&b, ": %d %s character", f.Count, f.Class)
	if f.Count > 1 {
		b.WriteString("s")
	}
	b.WriteString(" (")
	for i, r := range f.CodePoints {
		if i == 8 {
			fmt.Fprintf(&b, " and %d more", len(f.CodePoints)-i)
			break
		}
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(r.String())
	}
	fmt.Fprintf(&b, ") at character %d", f.Offset+1)
	if f.Text != "" {
		fmt.Fprintf(&b, ", spelling %q", f.Text)
	}
	return b.String()
}

// CodePoint is a character, written as U+XXXX (in JSON too).
type CodePoint rune

func (c CodePoint) String() string { return fmt.Sprintf("U+%04X", rune(c)) }

// MarshalText writes it as U+XXXX.
func (c CodePoint) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// Visible is s with every hidden character written as <U+XXXX>, to show names and pointers
// that hold some.
func Visible(s string) string {
	if !hasHidden(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if classOf(r) != "" {
			fmt.Fprintf(&b, "<U+%04X>", r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// hasHidden reports whether s holds any character of a class, allowed in its place or not:
// the quick test that lets almost every text through without more work.
func hasHidden(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7F {
				return true
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if classOf(r) != "" {
			return true
		}
		i += n - 1
	}
	return false
}

// classOf is the class of r wherever it stands, or "" for a character that is not hidden.
func classOf(r rune) Class {
	switch {
	case r < 0x20:
		if r == '\t' || r == '\n' || r == '\r' {
			return ""
		}
		return Control
	case r < 0x7F:
		return ""
	case r <= 0x9F:
		return Control
	case r < 0xAD:
		return ""
	case r >= 0xE0000 && r <= 0xE007F:
		return Tag
	}
	switch r {
	case 0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069:
		return Bidi
	case 0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF:
		return ZeroWidth
	case 0x180B, 0x180C, 0x180D, 0x180F:
		return VariationSelector
	}
	if r >= 0xFE00 && r <= 0xFE0F || r >= 0xE0100 && r <= 0xE01EF {
		return VariationSelector
	}
	if unicode.Is(unicode.Cf, r) || unicode.Is(defaultIgnorable, r) {
		return Format
	}
	return ""
}

// run is a run of hidden characters in one text.
type run struct {
	offset     int
	class      Class
	count      int
	codePoints []CodePoint
	text       string
}

// scanText returns the runs of hidden characters in s that their place does not allow.
func scanText(s string) []run {
	if !hasHidden(s) {
		return nil
	}
	rs := []rune(s)
	allowed := allowedTags(rs)
	var out []run
	for i, r := range rs {
		c := classOf(r)
		if c == "" || allowed[i] || allowedHere(rs, i, c) {
			continue
		}
		n := len(out)
		if n == 0 || out[n-1].class != c || out[n-1].offset+out[n-1].count != i {
			out = append(out, run{offset: i, class: c})
			n++
		}
		last := &out[n-1]
		last.count++
		if !slices.Contains(last.codePoints, CodePoint(r)) {
			last.codePoints = append(last.codePoints, CodePoint(r))
		}
		if c == Tag && r >= 0xE0020 && r <= 0xE007E {
			last.text += string(r - 0xE0000)
		}
	}
	return out
}

// rgiTagSequences are the tags of the flags Unicode recommends for general interchange
// (emoji-sequences.txt, RGI_Emoji_Tag_Sequence): England, Scotland and Wales, each after
// U+1F3F4 WAVING BLACK FLAG and ended by U+E007F CANCEL TAG. Any other tag spells text.
var rgiTagSequences = []string{"gbeng", "gbsct", "gbwls"}

// allowedTags marks the tag characters of rs that belong to a recommended flag (nil when
// there is none).
func allowedTags(rs []rune) map[int]bool {
	var ok map[int]bool
	for i, r := range rs {
		if r != 0x1F3F4 {
			continue
		}
	flags:
		for _, seq := range rgiTagSequences {
			end := i + 1 + len(seq)
			if end >= len(rs) || rs[end] != 0xE007F {
				continue
			}
			for j, c := range seq {
				if rs[i+1+j] != 0xE0000+c {
					continue flags
				}
			}
			if ok == nil {
				ok = map[int]bool{}
			}
			for j := i + 1; j <= end; j++ {
				ok[j] = true
			}
		}
	}
	return ok
}

// allowedHere reports whether the character rs[i] of class c is in a place where it has a
// visible purpose (see the classes).
func allowedHere(rs []rune, i int, c Class) bool {
	r := rs[i]
	var prev rune = -1
	if i > 0 {
		prev = rs[i-1]
	}
	switch {
	case r == 0x200D:
		return inEmojiSequence(rs, i) || betweenJoiningLetters(rs, i)
	case r == 0x200C:
		return betweenJoiningLetters(rs, i)
	case r == 0xFE0E || r == 0xFE0F:
		return prev >= 0 && (unicode.Is(emoji, prev) || unicode.Is(extendedPictographic, prev))
	case c == VariationSelector && (r >= 0xFE00 && r <= 0xFE0D || r >= 0xE0100):
		return prev >= 0 && unicode.Is(unicode.Han, prev)
	case r >= 0x180B && r <= 0x180F:
		return prev >= 0 && unicode.Is(unicode.Mongolian, prev) && unicode.IsLetter(prev)
	}
	return false
}

// inEmojiSequence reports whether the zero-width joiner rs[i] joins two pictographs, as
// Unicode's grapheme cluster rule GB11 (UAX #29) does: a pictograph, then any extending
// characters (variation selectors, skin tone modifiers, combining marks), the joiner, and a
// pictograph.
func inEmojiSequence(rs []rune, i int) bool {
	if i+1 >= len(rs) || !unicode.Is(extendedPictographic, rs[i+1]) {
		return false
	}
	j := i - 1
	for j >= 0 && extends(rs[j]) {
		j--
	}
	return j >= 0 && unicode.Is(extendedPictographic, rs[j])
}

// extends reports whether r extends the emoji before it: a variation selector, a skin tone
// modifier (U+1F3FB to U+1F3FF), the keycap or another combining mark.
func extends(r rune) bool {
	return r >= 0xFE00 && r <= 0xFE0F || r >= 0x1F3FB && r <= 0x1F3FF || unicode.In(r, unicode.Mn, unicode.Me)
}

// joiningScripts are the scripts whose writers put a zero-width joiner or non-joiner between
// letters to choose their forms: the cursive scripts (Persian's "mi‌khâham" needs one) and
// the Brahmic scripts of South Asia (a conjunct shown with its virama).
var joiningScripts = []*unicode.RangeTable{
	unicode.Arabic, unicode.Syriac, unicode.Nko, unicode.Mongolian,
	unicode.Devanagari, unicode.Bengali, unicode.Gurmukhi, unicode.Gujarati, unicode.Oriya,
	unicode.Tamil, unicode.Telugu, unicode.Kannada, unicode.Malayalam, unicode.Sinhala,
}

// betweenJoiningLetters reports whether rs[i] stands after a letter or mark of the joining
// scripts, and before another or at the end of a word (Malayalam writes the old form of a
// chillu letter with a joiner after the virama, at a word's end).
func betweenJoiningLetters(rs []rune, i int) bool {
	if i == 0 || !joiningLetter(rs[i-1]) {
		return false
	}
	return i+1 == len(rs) || joiningLetter(rs[i+1]) || !unicode.In(rs[i+1], unicode.L, unicode.M) && classOf(rs[i+1]) == ""
}

func joiningLetter(r rune) bool {
	return unicode.In(r, unicode.L, unicode.M) && unicode.In(r, joiningScripts...)
}

// Findings are the hidden characters in what the server's definitions and instructions tell
// the model (everything but _meta and icons: names, titles, descriptions, every string and
// member name of the schemas, prompt arguments, URIs, the instructions), in the order of the
// lists and, within a definition, of the pointers. The scan is made once per Server; the
// slice is shared, and not to be changed.
func (s *Server) Findings() []Finding { return s.findings() }

func (s *Server) scan() []Finding {
	var out []Finding
	for _, d := range s.defs {
		add := func(pointer string, key bool, runs []run) {
			for _, r := range runs {
				out = append(out, Finding{
					Server: s.key, Kind: d.kind, Index: d.index, Pointer: pointer, Key: key,
					Offset: r.offset, Class: r.class, Count: r.count, CodePoints: r.codePoints, Text: r.text,
				})
			}
		}
		if d.kind == Instructions {
			add("", false, scanText(d.text))
			continue
		}
		if !mayHide(d.raw) {
			continue // the common case: nothing to decode
		}
		walk(d.read().value, true, nil, func(path []string, text string, key bool) {
			if runs := scanText(text); runs != nil {
				add(pointer(path), key, runs)
			}
		})
	}
	for i := range out {
		if out[i].Kind != Instructions {
			out[i].Name = s.defs[s.at(out[i].Kind, out[i].Index)].name()
		}
	}
	return out
}

// at is the place in s.defs of the definition k, index.
func (s *Server) at(k Kind, index int) int {
	i, _ := slices.BinarySearchFunc(s.defs, [2]int{int(k), index}, func(d *definition, t [2]int) int {
		if c := int(d.kind) - t[0]; c != 0 {
			return c
		}
		return d.index - t[1]
	})
	return i
}

// mayHide reports whether the JSON text raw can hold a hidden character: as it is, or
// escaped (\b, \f, a \u escape of one, or of half of a surrogate pair, which may be one).
// Most definitions hold none, and pass without being decoded: the scan costs them a pass
// over their bytes.
func mayHide(raw []byte) bool {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\' && i+1 < len(raw):
			switch raw[i+1] {
			case 'b', 'f':
				return true
			case 'u':
				if i+6 > len(raw) {
					return true
				}
				r, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 32)
				if err != nil || r >= 0xD800 && r <= 0xDFFF || classOf(rune(r)) != "" {
					return true
				}
				i += 6
				continue
			}
			i += 2
		case c < utf8.RuneSelf:
			if c == 0x7F {
				return true
			}
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			if classOf(r) != "" {
				return true
			}
			i += n
		}
	}
	return false
}

// maxWarned is how many findings Warning names before it counts the rest.
const maxWarned = 5

// Warning is the one line that names findings of the server key, "" when there are none:
// `server "fs": hidden characters in what the model reads: tool "read" /description: 40 tag
// characters (U+E0049 ...) at character 1, spelling "Ignore ..."; ...`. The aggregator says
// it once per server at start-up, with the server's Findings (those of the tools its filters
// hide left out), and again with only the new ones after its lists change.
func Warning(key string, findings []Finding) string {
	if len(findings) == 0 {
		return ""
	}
	parts := make([]string, 0, min(len(findings), maxWarned+1))
	for i, f := range findings {
		if i == maxWarned {
			parts = append(parts, fmt.Sprintf("and %d more (check lists them all)", len(findings)-i))
			break
		}
		parts = append(parts, f.String())
	}
	return fmt.Sprintf("server %q: hidden characters in what the model reads: %s", key, strings.Join(parts, "; "))
}

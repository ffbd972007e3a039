package toolsearch

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// words splits text into lower-case words: at every character that is not a letter or a digit,
// and inside identifiers at camelCase humps (getHTTPResponse: get, http, response) and between
// letters and digits (utf8Decode: utf, 8, decode). snake_case, kebab-case, dotted names and the
// aggregator's separator all split at their punctuation.
func words(text string, visit func(w string)) {
	start := -1
	var prev rune
	flush := func(end int) {
		if start >= 0 && end > start {
			visit(strings.ToLower(text[start:end]))
		}
		start = -1
	}
	for i, r := range text {
		letter, digit := unicode.IsLetter(r), unicode.IsDigit(r)
		if !letter && !digit {
			flush(i)
			prev = r
			continue
		}
		if start >= 0 {
			switch {
			case unicode.IsUpper(r) && unicode.IsLower(prev):
				flush(i) // camelHump
			case unicode.IsLower(r) && unicode.IsUpper(prev) && i-start > utf8.RuneLen(prev):
				// HTTPResponse: the last capital starts the next word.
				p := i - utf8.RuneLen(prev)
				visit(strings.ToLower(text[start:p]))
				start = p
			case digit != unicode.IsDigit(prev):
				flush(i)
			}
		}
		if start < 0 {
			start = i
		}
		prev = r
	}
	flush(len(text))
}

// terms are the index terms of text: its words, without stop words, stemmed.
func terms(text string) []string {
	var out []string
	words(text, func(w string) {
		if stopWords()[w] {
			return
		}
		out = append(out, stem(w))
	})
	return out
}

// stem is a light suffix stripper for English: plurals, -ing, -ed, -ly, a final e, and a few
// derivations (-ation, -ment, -er). It maps create, creates, created, creating and creation to
// one term; it is meant to merge inflections, not to find roots, and leaves short words alone.
func stem(w string) string {
	if len(w) <= 3 || !isASCIILetters(w) {
		return w
	}
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "xes"), strings.HasSuffix(w, "ches"), strings.HasSuffix(w, "shes"), strings.HasSuffix(w, "zes"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		w = w[:len(w)-1]
	}
	for _, suf := range []string{"ations", "ation", "ings", "ing", "edly", "ed", "ment", "ly"} {
		if strings.HasSuffix(w, suf) && len(w)-len(suf) >= 3 && hasVowel(w[:len(w)-len(suf)]) {
			w = w[:len(w)-len(suf)]
			if suf == "ation" || suf == "ations" {
				w += "at" // creation: creat, like create
			}
			if n := len(w); n >= 2 && w[n-1] == w[n-2] && !strings.ContainsRune("lsz", rune(w[n-1])) {
				w = w[:n-1] // running: run
			}
			break
		}
	}
	if strings.HasSuffix(w, "e") && len(w) > 3 {
		w = w[:len(w)-1]
	}
	return w
}

func isASCIILetters(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

func hasVowel(w string) bool { return strings.ContainsAny(w, "aeiouy") }

// stopWords carry no meaning for a search of tools. The set is made on first use, not at init,
// like expansions.
var stopWords = sync.OnceValue(func() map[string]bool {
	return set(`a an the and or of to in on at by for from with without into onto over under about as is are was were be been being
it its this that these those there here i me my mine we our ours you your yours he she they them their his her
do does did done can could should would will shall may might must have has had having not no yes so than then
what which who whom whose when where why how all any some each every just also very too only own same such
please want need like get got let make use using used via per one
help tell give know`)
})

func set(list string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(list) {
		m[w] = true
	}
	return m
}

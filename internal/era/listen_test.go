package era

import (
	"reflect"
	"testing"
)

// The filters of several listens, merged into one (a shared server's): what they ask for
// together, whether one asks for all another does, and what of a listen's filter an
// acknowledgement agreed to.
func TestFilterSets(t *testing.T) {
	a := Filter{Tools: true, URIs: []string{"x://1", "x://2"}}
	b := Filter{Prompts: true, URIs: []string{"x://2", "x://3"}}
	u := a.Union(b)
	if want := (Filter{Tools: true, Prompts: true, URIs: []string{"x://1", "x://2", "x://3"}}); !reflect.DeepEqual(u, want) {
		t.Errorf("union %+v, want %+v", u, want)
	}
	if !u.Includes(a) || !u.Includes(b) || a.Includes(b) || a.Includes(u) || !a.Includes(Filter{}) {
		t.Errorf("Includes")
	}
	if (Filter{Tools: true}).Includes(Filter{Resources: true}) {
		t.Errorf("a filter of tools includes resources")
	}
	agreed := Filter{Tools: true, Prompts: true, URIs: []string{"x://2"}}
	if w := a.Within(agreed); !reflect.DeepEqual(w, Filter{Tools: true, URIs: []string{"x://2"}}) {
		t.Errorf("within %+v", w)
	}
}

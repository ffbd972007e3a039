package main

import (
	"errors"
	"flag"
	"fmt"
)

// cacheCmd manages the catalog cache of --lazy: "cache clear" empties it.
type cacheCmd struct{}

func (*cacheCmd) name() string     { return "cache" }
func (*cacheCmd) synopsis() string { return "cache clear" }

func (*cacheCmd) help() string {
	return `"cache clear" removes the catalogs --lazy keeps in the user's cache directory:
every server then starts with its next session once, and is cached again.
`
}

func (*cacheCmd) footer() string         { return "" }
func (*cacheCmd) setFlags(*flag.FlagSet) {}
func (*cacheCmd) check(args []string) error {
	switch {
	case len(args) == 0:
		return errors.New(`say what to do with the cache: "cache clear"`)
	case args[0] != "clear":
		return fmt.Errorf(`unknown action %q: the cache command has one, "clear"`, args[0])
	}
	return noArguments(args[1:])
}

func (*cacheCmd) run(_ []string, env *environment) int {
	cache, err := openCache()
	if err == nil {
		if w := cache.Warning(); w != "" {
			fmt.Fprintf(env.stderr, "%s: warning: %s\n", program, w)
		}
		err = cache.Clear()
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "%s: cache clear: %v\n", program, err)
		return exitError
	}
	fmt.Fprintf(env.stdout, "cleared the catalog cache %s\n", cache.Dir())
	return exitOK
}

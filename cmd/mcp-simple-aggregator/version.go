package main

import (
	"runtime/debug"
	"strings"
)

// Set by the release build (.goreleaser.yaml) with -ldflags "-X main.version=... -X
// main.commit=... -X main.date=...": the version without a leading "v", as the npm packages
// and server.json carry it.
var version, commit, date string

// buildVersion is the bare version the binary was built from, served as serverInfo.version.
func buildVersion() string {
	info, _ := debug.ReadBuildInfo()
	return bareVersion(version, info)
}

// versionLine is what --version prints.
func versionLine() string {
	info, _ := debug.ReadBuildInfo()
	return formatVersion(version, commit, date, info)
}

// bareVersion is the release version when stamped, otherwise the module version of the build
// info without its "v" (`go install ...@v1.2.3` gives 1.2.3), or "(devel)".
func bareVersion(stamped string, info *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if info != nil && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return strings.TrimPrefix(info.Main.Version, "v")
	}
	return "(devel)"
}

// formatVersion is the version, then the commit and the build date when the release build
// stamped them, or else the commit and its time as the go command recorded them (if it did).
func formatVersion(stamped, commit, date string, info *debug.BuildInfo) string {
	rev, when := commit, ""
	if date != "" {
		when = "built " + date
	}
	if rev == "" && info != nil {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = "committed " + s.Value
			}
		}
	}
	line := "mcp-simple-aggregator " + bareVersion(stamped, info)
	var details []string
	if rev != "" {
		details = append(details, "commit "+rev)
	}
	if when != "" {
		details = append(details, when)
	}
	if len(details) > 0 {
		line += " (" + strings.Join(details, ", ") + ")"
	}
	return line
}

// Command dist makes the packages that install mcp-simple-aggregator without Go from the
// binaries of a GoReleaser build (.goreleaser.yaml): the npm packages (a launcher and one
// package per platform, the esbuild pattern), the Claude Desktop bundles (.mcpb) and the MCP
// registry entry (server.json).
//
// `make dist` runs it after `goreleaser release --snapshot`; `make release` after a real
// release, then `dist publish-npm` to publish the npm packages. Usage:
//
//	go run ./internal/dist [-dist DIR] [-mcpb MCPB] [-npm NPM]
//	go run ./internal/dist publish-npm [-dist DIR] [-npm NPM]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// The names under which the program is published, in one place.
const (
	// npmScope holds every npm package: the unscoped name mcp-simple-aggregator belongs to
	// another project.
	npmScope = "@mcp-simple-aggregator"
	// command is the program's name: its binary, its npm command and the launcher package's
	// name within the scope.
	command = "mcp-simple-aggregator"
	// registryName is the server's name in the MCP registry, which checks it against the
	// launcher's mcpName (io.github.<owner>/<name> for a GitHub owner's namespace).
	registryName = "io.github.mcp-simple-aggregator/mcp-simple-aggregator"
	repoURL      = "https://github.com/mcp-simple-aggregator/mcp-simple-aggregator"
	description  = "One MCP server that bundles the servers of a Claude-style config file, over stdio"
	// license is the SPDX identifier of the license in LICENSE, which every package and
	// bundle declares (and carries, where the format has room for a file).
	license = "MIT"
	// licenseFile is the license's text, at the top of the repository, where dist runs.
	licenseFile = "LICENSE"
)

// launcherPackage is the npm package users install or run with npx.
const launcherPackage = npmScope + "/" + command

// A binary is one platform's program from the GoReleaser build.
type binary struct {
	GOOS, GOARCH string
	Path         string // the file, relative to the working directory
}

// npmOS and npmCPU are the names Node gives GOOS and GOARCH (process.platform, process.arch),
// which npm matches against a package's "os" and "cpu".
var (
	npmOS  = map[string]string{"linux": "linux", "darwin": "darwin", "windows": "win32"}
	npmCPU = map[string]string{"amd64": "x64", "arm64": "arm64"}
)

// platform is the npm name of the binary's platform, such as linux-x64.
func (b binary) platform() string { return npmOS[b.GOOS] + "-" + npmCPU[b.GOARCH] }

// exe is the binary's file name on its platform.
func (b binary) exe() string {
	if b.GOOS == "windows" {
		return command + ".exe"
	}
	return command
}

// build is what GoReleaser wrote into its dist directory.
type build struct {
	Version  string // without a leading "v"
	Tag      string
	Binaries []binary
	// License is the text of LICENSE, copied into every npm package and bundle.
	License []byte
}

// readBuild reads GoReleaser's metadata.json and artifacts.json.
func readBuild(dir string) (*build, error) {
	var meta struct {
		Version string `json:"version"`
		Tag     string `json:"tag"`
	}
	if err := readJSON(filepath.Join(dir, "metadata.json"), &meta); err != nil {
		return nil, err
	}
	if meta.Version == "" {
		return nil, fmt.Errorf("%s: no version", filepath.Join(dir, "metadata.json"))
	}
	var artifacts []struct {
		Type   string `json:"type"`
		Path   string `json:"path"`
		GOOS   string `json:"goos"`
		GOARCH string `json:"goarch"`
	}
	if err := readJSON(filepath.Join(dir, "artifacts.json"), &artifacts); err != nil {
		return nil, err
	}
	b := &build{Version: strings.TrimPrefix(meta.Version, "v"), Tag: meta.Tag}
	for _, a := range artifacts {
		if a.Type != "Binary" {
			continue
		}
		if npmOS[a.GOOS] == "" || npmCPU[a.GOARCH] == "" {
			return nil, fmt.Errorf("%s: binary %s is for %s/%s, which has no npm platform here", filepath.Join(dir, "artifacts.json"), a.Path, a.GOOS, a.GOARCH)
		}
		b.Binaries = append(b.Binaries, binary{GOOS: a.GOOS, GOARCH: a.GOARCH, Path: a.Path})
	}
	if len(b.Binaries) == 0 {
		return nil, fmt.Errorf("%s: no binaries: run GoReleaser first (make dist)", filepath.Join(dir, "artifacts.json"))
	}
	slices.SortFunc(b.Binaries, func(x, y binary) int { return strings.Compare(x.platform(), y.platform()) })
	return b, nil
}

func main() {
	args := os.Args[1:]
	publish := len(args) > 0 && args[0] == "publish-npm"
	if publish {
		args = args[1:]
	}
	fs := flag.NewFlagSet("dist", flag.ExitOnError)
	dir := fs.String("dist", "dist", "GoReleaser's output `directory`, where the packages are written too")
	mcpb := fs.String("mcpb", "internal/dist/tools/node_modules/.bin/mcpb", "the mcpb `command` (installed by make dist)")
	npm := fs.String("npm", "npm", "the npm `command`")
	fs.Parse(args)
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "dist: unexpected argument %q\n", fs.Arg(0))
		os.Exit(2)
	}
	var err error
	if publish {
		err = publishNPM(*dir, *npm)
	} else {
		err = run(*dir, *mcpb, *npm)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		os.Exit(1)
	}
}

func run(dir, mcpb, npm string) error {
	b, err := readBuild(dir)
	if err != nil {
		return err
	}
	if b.License, err = os.ReadFile(licenseFile); err != nil {
		return fmt.Errorf("the license every package carries: %w (run dist at the top of the repository)", err)
	}
	index, err := writeNPM(dir, b)
	if err != nil {
		return err
	}
	if err := packNPM(dir, index, npm); err != nil {
		return err
	}
	bundles, err := writeBundles(dir, b, mcpb)
	if err != nil {
		return err
	}
	srv, err := serverJSON(b.Version, bundleRefs(b, bundles))
	if err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, "server.json"), srv); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "dist: %d npm packages in %s, %d bundles, %s\n", len(index.Platforms)+1,
		filepath.Join(dir, "npm"), len(bundles), filepath.Join(dir, "server.json"))
	return nil
}

// publishNPM publishes the npm tarballs of dist/npm: the platform packages first, so that the
// launcher's optional dependencies exist when it appears.
func publishNPM(dir, npm string) error {
	var index npmIndex
	if err := readJSON(filepath.Join(dir, "npm", "packages.json"), &index); err != nil {
		return err
	}
	tag := "latest"
	if strings.Contains(index.Version, "-") {
		tag = "next" // a pre-release must not become what `npx -y` runs
	}
	for _, p := range append(slices.Clone(index.Platforms), index.Launcher) {
		// A version is published once: skip what an earlier, interrupted run published.
		if out, err := exec.Command(npm, "view", p.Name+"@"+index.Version, "version").Output(); err == nil && strings.TrimSpace(string(out)) == index.Version {
			fmt.Fprintf(os.Stderr, "dist: %s@%s is already published\n", p.Name, index.Version)
			continue
		}
		cmd := exec.Command(npm, "publish", "--access", "public", "--tag", tag, filepath.Join(dir, "npm", p.Tarball))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("npm publish %s: %w", p.Name, err)
		}
	}
	return nil
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // ">=18", not "\u003e=18"
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// runTool runs a packaging tool in dir, its output on stderr; an error names the tool.
func runTool(dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s (in %s): %w", filepath.Base(name), strings.Join(args, " "), dir, err)
	}
	return nil
}

// copyFile copies a binary, executable.
func copyFile(dst, src string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o755)
}

package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
)

// launcherJS is the launcher package's command: it finds the platform package for the running
// OS and CPU and runs its binary.
//
//go:embed launcher.js
var launcherJS string

var launcherTemplate = template.Must(template.New("launcher.js").Delims("/*{{", "}}*/").Parse(launcherJS))

// npmIndex lists the packages of dist/npm, for publishing and for the tests.
type npmIndex struct {
	Version   string       `json:"version"`
	Launcher  npmPackage   `json:"launcher"`
	Platforms []npmPackage `json:"platforms"`
}

type npmPackage struct {
	Name    string `json:"name"`
	Dir     string `json:"dir"`              // the package's directory in dist/npm
	Tarball string `json:"tarball"`          // npm pack's output in dist/npm
	OS      string `json:"os,omitempty"`     // platform packages: process.platform
	CPU     string `json:"cpu,omitempty"`    // and process.arch
	Binary  string `json:"binary,omitempty"` // and the binary, within the package
}

// packageJSON is the part of package.json written here. None has "scripts": nothing runs at
// install time, so `npm install --ignore-scripts` installs a working command.
type packageJSON struct {
	Name                 string            `json:"name"`
	Version              string            `json:"version"`
	Description          string            `json:"description"`
	License              string            `json:"license"`
	MCPName              string            `json:"mcpName,omitempty"`
	Repository           map[string]string `json:"repository"`
	Homepage             string            `json:"homepage"`
	Bugs                 string            `json:"bugs"`
	Keywords             []string          `json:"keywords,omitempty"`
	Bin                  map[string]string `json:"bin,omitempty"`
	OS                   []string          `json:"os,omitempty"`
	CPU                  []string          `json:"cpu,omitempty"`
	Files                []string          `json:"files"`
	Engines              map[string]string `json:"engines,omitempty"`
	PreferUnplugged      bool              `json:"preferUnplugged,omitempty"` // Yarn PnP: keep the binary on disk
	OptionalDependencies map[string]string `json:"optionalDependencies,omitempty"`
}

func basePackage(name, version, desc string) packageJSON {
	return packageJSON{
		Name:        name,
		Version:     version,
		Description: desc,
		License:     license,
		Repository:  map[string]string{"type": "git", "url": "git+" + repoURL + ".git"},
		Homepage:    repoURL + "#readme",
		Bugs:        repoURL + "/issues",
	}
}

// writeNPM writes the launcher and one package per platform into dist/npm.
func writeNPM(dist string, b *build) (*npmIndex, error) {
	root := filepath.Join(dist, "npm")
	if err := os.RemoveAll(root); err != nil {
		return nil, err
	}
	index := &npmIndex{Version: b.Version}
	platforms := map[string]string{} // "linux-x64" -> package name, for the launcher
	optional := map[string]string{}
	for _, bin := range b.Binaries {
		p := npmPackage{Name: npmScope + "/" + bin.platform(), Dir: bin.platform(), OS: npmOS[bin.GOOS], CPU: npmCPU[bin.GOARCH], Binary: "bin/" + bin.exe()}
		pkg := basePackage(p.Name, b.Version, fmt.Sprintf("The %s binary of %s for %s %s; installed by %s, not on its own.", command, launcherPackage, bin.GOOS, bin.GOARCH, launcherPackage))
		pkg.OS, pkg.CPU = []string{p.OS}, []string{p.CPU}
		pkg.Files = []string{p.Binary}
		pkg.PreferUnplugged = true
		dir := filepath.Join(root, p.Dir)
		if err := copyFile(filepath.Join(dir, p.Binary), bin.Path); err != nil {
			return nil, err
		}
		readme := fmt.Sprintf("# %s\n\nThe `%s` binary for %s %s. Install [`%s`](https://www.npmjs.com/package/%s) instead: it depends on this package on this platform and runs its binary.\n", p.Name, command, bin.GOOS, bin.GOARCH, launcherPackage, launcherPackage)
		if err := writePackage(dir, pkg, readme, b.License); err != nil {
			return nil, err
		}
		index.Platforms = append(index.Platforms, p)
		platforms[bin.platform()] = p.Name
		optional[p.Name] = b.Version
	}

	l := npmPackage{Name: launcherPackage, Dir: command}
	pkg := basePackage(l.Name, b.Version, description+".")
	pkg.MCPName = registryName
	pkg.Keywords = []string{"mcp", "model-context-protocol", "mcp-server", "aggregator", "claude"}
	pkg.Bin = map[string]string{command: "bin/" + command + ".js"}
	pkg.Files = []string{"bin/" + command + ".js"}
	pkg.Engines = map[string]string{"node": ">=18"}
	pkg.OptionalDependencies = optional
	dir := filepath.Join(root, l.Dir)
	platformsJSON, err := json.MarshalIndent(platforms, "", "  ")
	if err != nil {
		return nil, err
	}
	var js strings.Builder
	if err := launcherTemplate.Execute(&js, map[string]string{"Platforms": string(platformsJSON), "Command": command}); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", command+".js"), []byte(js.String()), 0o755); err != nil {
		return nil, err
	}
	readme := fmt.Sprintf("# %s\n\n%s.\n\n```json\n{\"mcpServers\": {\"aggregator\": {\"command\": \"npx\", \"args\": [\"-y\", \"%s\", \"--config\", \"/path/to/mcp-servers.json\", \"--separator\", \"__\"]}}}\n```\n\nSee %s#readme.\n", launcherPackage, description, launcherPackage, repoURL)
	if err := writePackage(dir, pkg, readme, b.License); err != nil {
		return nil, err
	}
	index.Launcher = l
	return index, nil
}

// packNPM packs every package of dist/npm with npm pack and writes dist/npm/packages.json.
func packNPM(dist string, index *npmIndex, npm string) error {
	root := filepath.Join(dist, "npm")
	for _, p := range append([]*npmPackage{&index.Launcher}, ptrs(index.Platforms)...) {
		t, err := npmPack(npm, filepath.Join(root, p.Dir), root)
		if err != nil {
			return err
		}
		p.Tarball = t
	}
	return writeJSON(filepath.Join(root, "packages.json"), index)
}

func ptrs(ps []npmPackage) []*npmPackage {
	out := make([]*npmPackage, len(ps))
	for i := range ps {
		out[i] = &ps[i]
	}
	return out
}

func writePackage(dir string, pkg packageJSON, readme string, licenseText []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, "package.json"), pkg); err != nil {
		return err
	}
	// npm packs LICENSE whatever "files" says.
	if err := os.WriteFile(filepath.Join(dir, licenseFile), licenseText, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(readme), 0o644)
}

// npmPack packs the package in dir into dest and returns the tarball's file name.
func npmPack(npm, dir, dest string) (string, error) {
	abs, err := filepath.Abs(dest)
	if err != nil {
		return "", err
	}
	cmd := exec.Command(npm, "pack", "--json", "--pack-destination", abs)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("npm pack (in %s): %w", dir, err)
	}
	var packed []struct {
		Filename string `json:"filename"`
	}
	if err := json.Unmarshal(out, &packed); err != nil || len(packed) != 1 {
		return "", fmt.Errorf("npm pack (in %s): unexpected output %q", dir, out)
	}
	// npm names a scoped package's tarball scope-name-version.tgz.
	return filepath.Base(packed[0].Filename), nil
}

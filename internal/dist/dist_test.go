package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The published schemas, copied into testdata at the top of the repository (see its README).
const (
	registrySchemaFile = "../../testdata/registry/server.schema.json"
	mcpbSchemaFile     = "../../testdata/mcpb/mcpb-manifest-v0.3.schema.json"
)

// licenseText is the repository's LICENSE, which every artifact must carry.
func licenseText(t *testing.T) []byte {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", licenseFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(text, []byte("MIT License\n")) || !bytes.Contains(text, []byte("Copyright (c) the mcp-simple-aggregator authors")) {
		t.Fatalf("LICENSE is not the MIT license of the mcp-simple-aggregator authors:\n%s", text)
	}
	return text
}

func compile(t *testing.T, file string) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	abs, _ := filepath.Abs(file)
	c := jsonschema.NewCompiler()
	if err := c.AddResource(abs, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(abs)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return s
}

// validate checks v, as it would be written to a file, against the schema.
func validate(t *testing.T, s *jsonschema.Schema, what string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	validateJSON(t, s, what, data)
}

func validateJSON(t *testing.T, s *jsonschema.Schema, what string, data []byte) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := s.Validate(inst); err != nil {
		t.Errorf("%s does not follow its schema: %v", what, err)
	}
}

var testBinaries = []binary{
	{GOOS: "darwin", GOARCH: "amd64"}, {GOOS: "darwin", GOARCH: "arm64"},
	{GOOS: "linux", GOARCH: "amd64"}, {GOOS: "linux", GOARCH: "arm64"},
	{GOOS: "windows", GOARCH: "amd64"}, {GOOS: "windows", GOARCH: "arm64"},
}

func TestServerJSONFollowsRegistrySchema(t *testing.T) {
	s := compile(t, registrySchemaFile)
	srv, err := serverJSON("1.2.3", []bundleRef{{URL: repoURL + "/releases/download/v1.2.3/x.mcpb", SHA256: strings.Repeat("0a", 32)}})
	if err != nil {
		t.Fatal(err)
	}
	validate(t, s, "server.json", srv)
	if srv["$schema"] != serverSchema {
		t.Errorf("$schema = %v, want %s", srv["$schema"], serverSchema)
	}

	// The schema catches what the registry would refuse (so that the check above means something).
	bad, _ := serverJSON("1.2.3", nil)
	bad["name"] = "mcp-simple-aggregator" // no namespace
	data, _ := json.Marshal(bad)
	inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if s.Validate(inst) == nil {
		t.Error("a name without a namespace passes the registry schema")
	}
}

func TestManifestFollowsMCPBSchema(t *testing.T) {
	s := compile(t, mcpbSchemaFile)
	for _, bin := range testBinaries {
		if bundleOS[bin.GOOS] == "" {
			continue
		}
		m := manifest("1.2.3", bin)
		validate(t, s, bin.GOOS+"/"+bin.GOARCH+" manifest.json", m)
		if m["license"] != license {
			t.Errorf("%s: the manifest declares the license %v, want %s", bin.GOOS, m["license"], license)
		}
		srv := m["server"].(map[string]any)
		cfg := srv["mcp_config"].(map[string]any)
		if cfg["command"] != "${__dirname}/"+srv["entry_point"].(string) {
			t.Errorf("%s: the command %v is not the entry point %v", bin.GOOS, cfg["command"], srv["entry_point"])
		}
		if want := "server/" + bin.exe(); srv["entry_point"] != want {
			t.Errorf("%s: entry point %v, want %s", bin.GOOS, srv["entry_point"], want)
		}
		args := strings.Join(cfg["args"].([]string), " ")
		if args != "--config ${user_config.config_file} --separator __" {
			t.Errorf("%s: args %q, want the user's config file and the separator Claude accepts", bin.GOOS, args)
		}
	}
}

// TestNPMPackages checks the generated packages: no install scripts, one platform package per
// binary with the npm names of its OS and CPU, all of them optional dependencies of the
// launcher at the same version, and the launcher's mcpName equal to server.json's name.
func TestNPMPackages(t *testing.T) {
	dist := t.TempDir()
	b := &build{Version: "1.2.3", License: licenseText(t)}
	for _, bin := range testBinaries {
		bin.Path = filepath.Join(dist, bin.GOOS+"_"+bin.GOARCH, bin.exe())
		if err := os.MkdirAll(filepath.Dir(bin.Path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin.Path, []byte("binary for "+bin.platform()), 0o755); err != nil {
			t.Fatal(err)
		}
		b.Binaries = append(b.Binaries, bin)
	}
	index, err := writeNPM(dist, b)
	if err != nil {
		t.Fatal(err)
	}
	checkPackages(t, filepath.Join(dist, "npm"), index, "1.2.3")

	js, err := os.ReadFile(filepath.Join(dist, "npm", index.Launcher.Dir, "bin", command+".js"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(js, []byte("/*{{")) {
		t.Errorf("the launcher has template text left:\n%s", js)
	}
	for _, p := range index.Platforms {
		if !bytes.Contains(js, []byte(`"`+p.OS+"-"+p.CPU+`": "`+p.Name+`"`)) {
			t.Errorf("the launcher does not map %s-%s to %s", p.OS, p.CPU, p.Name)
		}
	}
	if node, err := exec.LookPath("node"); err == nil {
		if out, err := exec.Command(node, "--check", filepath.Join(dist, "npm", index.Launcher.Dir, "bin", command+".js")).CombinedOutput(); err != nil {
			t.Errorf("node --check on the launcher: %v\n%s", err, out)
		}
	}
}

// checkPackages checks the package directories of dist/npm against the index.
func checkPackages(t *testing.T, root string, index *npmIndex, version string) {
	t.Helper()
	text := licenseText(t)
	read := func(dir string) map[string]any {
		var m map[string]any
		if err := readJSON(filepath.Join(root, dir, "package.json"), &m); err != nil {
			t.Fatal(err)
		}
		if m["license"] != license {
			t.Errorf("%s/package.json declares the license %v, want %s", dir, m["license"], license)
		}
		if got, err := os.ReadFile(filepath.Join(root, dir, licenseFile)); err != nil || !bytes.Equal(got, text) {
			t.Errorf("%s: no LICENSE with the text of the repository's (%v)", dir, err)
		}
		if _, ok := m["scripts"]; ok {
			t.Errorf("%s/package.json has scripts: nothing may run at install time", dir)
		}
		if m["version"] != version {
			t.Errorf("%s/package.json: version %v, want %s", dir, m["version"], version)
		}
		return m
	}
	l := read(index.Launcher.Dir)
	if l["name"] != launcherPackage || l["mcpName"] != registryName {
		t.Errorf("launcher: name %v, mcpName %v; want %s, %s", l["name"], l["mcpName"], launcherPackage, registryName)
	}
	if bin, _ := l["bin"].(map[string]any); bin[command] != "bin/"+command+".js" {
		t.Errorf("launcher: bin %v, want the command %s", l["bin"], command)
	}
	opt, _ := l["optionalDependencies"].(map[string]any)
	if len(opt) != len(index.Platforms) || len(index.Platforms) == 0 {
		t.Errorf("launcher: optional dependencies %v, want the %d platform packages", opt, len(index.Platforms))
	}
	for _, p := range index.Platforms {
		m := read(p.Dir)
		if m["name"] != p.Name || opt[p.Name] != version {
			t.Errorf("%s: name %v; the launcher asks for version %v of it, want %s", p.Dir, m["name"], opt[p.Name], version)
		}
		if !strings.HasPrefix(p.Name, npmScope+"/") {
			t.Errorf("%s is not in the scope %s", p.Name, npmScope)
		}
		if oses, cpu := m["os"].([]any), m["cpu"].([]any); len(oses) != 1 || oses[0] != p.OS || len(cpu) != 1 || cpu[0] != p.CPU {
			t.Errorf("%s: os %v, cpu %v; want [%s], [%s]", p.Dir, m["os"], m["cpu"], p.OS, p.CPU)
		}
		fi, err := os.Stat(filepath.Join(root, p.Dir, p.Binary))
		if err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("%s: the binary %s is missing or not executable (%v)", p.Dir, p.Binary, err)
		}
	}
}

// TestDist checks the output of a real `make dist` in $MCP_DIST_DIR (make dist-check sets it):
// server.json and every bundle's manifest against the published schemas, the bundles' hashes in
// server.json, and the npm packages.
func TestDist(t *testing.T) {
	dist := os.Getenv("MCP_DIST_DIR")
	if dist == "" {
		t.Skip("MCP_DIST_DIR is not set: run make dist, then make dist-check")
	}
	srvData, err := os.ReadFile(filepath.Join(dist, "server.json"))
	if err != nil {
		t.Fatal(err)
	}
	validateJSON(t, compile(t, registrySchemaFile), "dist/server.json", srvData)
	var srv struct {
		Name     string
		Version  string
		Packages []struct {
			RegistryType, Identifier, Version, FileSha256 string
		}
	}
	if err := json.Unmarshal(srvData, &srv); err != nil {
		t.Fatal(err)
	}

	var index npmIndex
	if err := readJSON(filepath.Join(dist, "npm", "packages.json"), &index); err != nil {
		t.Fatal(err)
	}
	checkPackages(t, filepath.Join(dist, "npm"), &index, srv.Version)
	text := licenseText(t)
	for _, p := range append([]npmPackage{index.Launcher}, index.Platforms...) {
		files, err := archiveFiles(filepath.Join(dist, "npm", p.Tarball))
		if err != nil {
			t.Errorf("%s: no tarball: %v", p.Name, err)
			continue
		}
		if err := checkLicenseFile(p.Tarball, files, "package/"+licenseFile, text); err != nil {
			t.Error(err)
		}
	}

	manifests, _ := filepath.Glob(filepath.Join(dist, "mcpb", "*", "manifest.json"))
	bundles, _ := filepath.Glob(filepath.Join(dist, "*.mcpb"))
	if len(manifests) == 0 || len(manifests) != len(bundles) {
		t.Fatalf("%d bundle manifests and %d bundles in %s", len(manifests), len(bundles), dist)
	}
	mcpbSchema := compile(t, mcpbSchemaFile)
	for _, m := range manifests {
		data, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		validateJSON(t, mcpbSchema, m, data)
		var man struct{ License string }
		if err := json.Unmarshal(data, &man); err != nil || man.License != license {
			t.Errorf("%s declares the license %q, want %s", m, man.License, license)
		}
	}
	for _, b := range bundles {
		files, err := archiveFiles(b)
		if err == nil {
			err = checkLicenseFile(b, files, licenseFile, text)
		}
		if err != nil {
			t.Error(err)
		}
	}

	sums := map[string]string{}
	for _, b := range bundles {
		sum, err := sha256File(b)
		if err != nil {
			t.Fatal(err)
		}
		sums[filepath.Base(b)] = sum
	}
	npmSeen := false
	for _, p := range srv.Packages {
		switch p.RegistryType {
		case "npm":
			npmSeen = true
			if p.Identifier != index.Launcher.Name || p.Version != index.Version {
				t.Errorf("server.json names npm package %s@%s, want %s@%s", p.Identifier, p.Version, index.Launcher.Name, index.Version)
			}
		case "mcpb":
			file := p.Identifier[strings.LastIndex(p.Identifier, "/")+1:]
			if sums[file] != p.FileSha256 {
				t.Errorf("server.json: bundle %s has sha256 %s; the file has %q", file, p.FileSha256, sums[file])
			}
			delete(sums, file)
		}
	}
	if !npmSeen {
		t.Error("server.json names no npm package")
	}
	for file := range sums {
		t.Errorf("server.json does not name the bundle %s", file)
	}
}

// TestDistGoReleaser checks GoReleaser's part of a real `make dist` in $MCP_DIST_DIR: an archive
// per platform, the deb and rpm packages and the cask, all but the cask in checksums.txt, and
// the binary in each bundle.
func TestDistGoReleaser(t *testing.T) {
	dist := os.Getenv("MCP_DIST_DIR")
	if dist == "" {
		t.Skip("MCP_DIST_DIR is not set: run make dist, then make dist-check")
	}
	var artifacts []struct {
		Type, Name, Path, GOOS, GOARCH string
	}
	if err := readJSON(filepath.Join(dist, "artifacts.json"), &artifacts); err != nil {
		t.Fatal(err)
	}
	sums := map[string]bool{}
	f, err := os.Open(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 {
			sums[fields[1]] = true
		}
	}
	archives := map[string]bool{}
	count := map[string]int{}
	text := licenseText(t)
	for _, a := range artifacts {
		count[a.Type]++
		// GoReleaser's paths are relative to where it ran, the directory above dist.
		file := filepath.Join(filepath.Dir(dist), a.Path)
		switch a.Type {
		case "Archive":
			archives[a.GOOS+"/"+a.GOARCH] = true
			if !sums[a.Name] {
				t.Errorf("checksums.txt does not list %s", a.Name)
			}
			files, err := archiveFiles(file)
			if err == nil {
				err = checkLicenseFile(a.Name, files, licenseFile, text)
			}
			if err != nil {
				t.Error(err)
			}
		case "Linux Package":
			if !sums[a.Name] {
				t.Errorf("checksums.txt does not list %s", a.Name)
			}
			if err := checkLinuxPackageLicense(file, text); err != nil {
				t.Error(err)
			}
		case "Homebrew Cask":
			cask, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(cask, []byte(`"com.apple.quarantine"`)) {
				t.Errorf("the cask %s does not clear the quarantine of the unsigned binary:\n%s", a.Path, cask)
			}
		}
	}
	for _, bin := range testBinaries {
		if !archives[bin.GOOS+"/"+bin.GOARCH] {
			t.Errorf("no archive for %s/%s", bin.GOOS, bin.GOARCH)
		}
	}
	if count["Linux Package"] != 4 || count["Homebrew Cask"] != 1 {
		t.Errorf("%d Linux packages and %d casks, want deb and rpm for amd64 and arm64, and one cask", count["Linux Package"], count["Homebrew Cask"])
	}

	bundles, _ := filepath.Glob(filepath.Join(dist, "*.mcpb"))
	for _, b := range bundles {
		z, err := zip.OpenReader(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		files := map[string]os.FileMode{}
		for _, f := range z.File {
			files[f.Name] = f.Mode()
		}
		z.Close()
		exe := "server/" + command
		if strings.Contains(b, "_windows_") {
			exe += ".exe"
		}
		if _, ok := files["manifest.json"]; !ok {
			t.Errorf("%s has no manifest.json", b)
		}
		if mode, ok := files[exe]; !ok || (!strings.HasSuffix(exe, ".exe") && mode&0o111 == 0) {
			t.Errorf("%s: %s is missing or not executable (%v)", b, exe, mode)
		}
	}
}

func TestReadBuild(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("metadata.json", `{"project_name":"mcp-simple-aggregator","tag":"v1.2.3","version":"1.2.3"}`)
	write("artifacts.json", `[
		{"type":"Binary","path":"dist/w/mcp-simple-aggregator.exe","goos":"windows","goarch":"amd64"},
		{"type":"Archive","path":"dist/x.tar.gz","goos":"linux","goarch":"amd64"},
		{"type":"Binary","path":"dist/l/mcp-simple-aggregator","goos":"linux","goarch":"arm64"}]`)
	b, err := readBuild(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b.Version != "1.2.3" || b.Tag != "v1.2.3" || len(b.Binaries) != 2 || b.Binaries[0].platform() != "linux-arm64" || b.Binaries[1].exe() != "mcp-simple-aggregator.exe" {
		t.Errorf("readBuild = %+v", b)
	}

	// Without a GoReleaser build first, the error says what to do.
	write("artifacts.json", `[]`)
	if _, err := readBuild(dir); err == nil || !strings.Contains(err.Error(), "no binaries: run GoReleaser first (make dist)") {
		t.Errorf("readBuild without binaries: %v", err)
	}
	write("artifacts.json", `[{"type":"Binary","path":"p","goos":"plan9","goarch":"amd64"}]`)
	if _, err := readBuild(dir); err == nil || !strings.Contains(err.Error(), "plan9/amd64, which has no npm platform") {
		t.Errorf("readBuild with a plan9 binary: %v", err)
	}
}

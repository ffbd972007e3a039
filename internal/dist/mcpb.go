package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// bundleOS are the platforms Claude Desktop runs on, by GOOS, with the manifest's name for it.
var bundleOS = map[string]string{"darwin": "darwin", "windows": "win32"}

// manifestVersion is the MCPB manifest version written: the newest that the pinned mcpb
// (internal/dist/tools) calls "latest", testdata/mcpb/mcpb-manifest-v0.3.schema.json.
const manifestVersion = "0.3"

// A bundle is one packed .mcpb file.
type bundle struct {
	Bin    binary
	File   string // the file name in dist
	SHA256 string
}

// manifest is the bundle's manifest.json: a binary server that reads its configuration file
// from the path the user gives in Claude Desktop's settings of the extension.
func manifest(version string, bin binary) map[string]any {
	entry := "server/" + bin.exe()
	return map[string]any{
		"manifest_version": manifestVersion,
		"name":             command,
		"display_name":     "MCP Simple Aggregator",
		"version":          version,
		"description":      description + ".",
		"long_description": "Starts every MCP server listed in a configuration file in the format of claude_desktop_config.json ({\"mcpServers\": {...}}) as a child process and serves all of their tools through this one extension, each tool named after its server's key (calc__add for the tool add of the server calc). A server that crashes takes only its own tools with it, and no process it started outlives it.",
		"author":           map[string]any{"name": "The mcp-simple-aggregator authors", "url": repoURL},
		"repository":       map[string]any{"type": "git", "url": repoURL},
		"homepage":         repoURL,
		"license":          license,
		"documentation":    repoURL + "#readme",
		"support":          repoURL + "/issues",
		"server": map[string]any{
			"type":        "binary",
			"entry_point": entry,
			"mcp_config": map[string]any{
				"command": "${__dirname}/" + entry,
				// Claude rejects ":" in tool names.
				"args": []string{"--config", "${user_config.config_file}", "--separator", "__"},
			},
		},
		"tools_generated": true,
		"keywords":        []string{"mcp", "aggregator", "proxy"},
		"compatibility":   map[string]any{"platforms": []string{bundleOS[bin.GOOS]}},
		"user_config": map[string]any{
			"config_file": map[string]any{
				"type":        "file",
				"title":       "Servers file",
				"description": "The JSON file that lists the MCP servers to bundle, in the format of claude_desktop_config.json: {\"mcpServers\": {\"name\": {\"command\": ..., \"args\": [...]}}}.",
				"required":    true,
			},
		},
	}
}

// bundleName is the .mcpb's file name, named like the release archives.
func bundleName(version string, bin binary) string {
	return fmt.Sprintf("%s_%s_%s_%s.mcpb", command, version, bin.GOOS, bin.GOARCH)
}

// writeBundles writes one bundle directory per Claude Desktop platform into dist/mcpb, checks
// its manifest with `mcpb validate` and packs it with `mcpb pack` into dist.
func writeBundles(dist string, b *build, mcpb string) ([]bundle, error) {
	root := filepath.Join(dist, "mcpb")
	if err := os.RemoveAll(root); err != nil {
		return nil, err
	}
	mcpbAbs, err := filepath.Abs(mcpb)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(mcpbAbs); err != nil {
		return nil, fmt.Errorf("the mcpb tool: %w (make dist installs it with npm ci in internal/dist/tools)", err)
	}
	var bundles []bundle
	for _, bin := range b.Binaries {
		if bundleOS[bin.GOOS] == "" {
			continue
		}
		dir := filepath.Join(root, bin.GOOS+"_"+bin.GOARCH)
		if err := copyFile(filepath.Join(dir, "server", bin.exe()), bin.Path); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, licenseFile), b.License, 0o644); err != nil {
			return nil, err
		}
		if err := writeJSON(filepath.Join(dir, "manifest.json"), manifest(b.Version, bin)); err != nil {
			return nil, err
		}
		out, err := filepath.Abs(filepath.Join(dist, bundleName(b.Version, bin)))
		if err != nil {
			return nil, err
		}
		if err := runTool(dir, mcpbAbs, "validate", "manifest.json"); err != nil {
			return nil, err
		}
		if err := runTool(dir, mcpbAbs, "pack", ".", out); err != nil {
			return nil, err
		}
		sum, err := sha256File(out)
		if err != nil {
			return nil, err
		}
		bundles = append(bundles, bundle{Bin: bin, File: filepath.Base(out), SHA256: sum})
	}
	return bundles, nil
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

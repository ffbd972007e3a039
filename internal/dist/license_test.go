package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	be "encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func tarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, data := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(data))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// deb is a Debian package as nfpm writes it: an ar archive of debian-binary, control.tar.gz
// and data.tar.gz.
func deb(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("!<arch>\n")
	for _, m := range []struct {
		name string
		data []byte
	}{{"debian-binary", []byte("2.0\n")}, {"control.tar.gz", tarGz(t, map[string]string{"./control": "Package: x\n"})}, {"data.tar.gz", tarGz(t, files)}} {
		fmt.Fprintf(&buf, "%-16s%-12s%-6s%-6s%-8s%-10d`\n", m.name, "0", "0", "0", "100644", len(m.data))
		buf.Write(m.data)
		if len(m.data)%2 == 1 {
			buf.WriteByte('\n')
		}
	}
	return buf.Bytes()
}

// rpmFile is an rpm with the lead, an empty signature header (padded) and a main header with
// the string tags given.
func rpmFile(lic string, basenames []string) []byte {
	header := func(entries [][4]uint32, store []byte) []byte {
		var b bytes.Buffer
		b.Write([]byte{0x8e, 0xad, 0xe8, 0x01, 0, 0, 0, 0})
		be.Write(&b, be.BigEndian, uint32(len(entries)))
		be.Write(&b, be.BigEndian, uint32(len(store)))
		for _, e := range entries {
			be.Write(&b, be.BigEndian, e)
		}
		b.Write(store)
		return b.Bytes()
	}
	var out bytes.Buffer
	lead := make([]byte, 96)
	copy(lead, []byte{0xed, 0xab, 0xee, 0xdb})
	out.Write(lead)
	out.Write(header(nil, []byte{1, 2, 3})) // 19 bytes, padded to 24
	out.Write(make([]byte, 5))
	var store []byte
	var entries [][4]uint32
	if lic != "" {
		entries = append(entries, [4]uint32{rpmTagLicense, rpmString, uint32(len(store)), 1})
		store = append(append(store, lic...), 0)
	}
	if len(basenames) > 0 {
		entries = append(entries, [4]uint32{rpmTagBasenames, rpmStringArray, uint32(len(store)), uint32(len(basenames))})
		for _, n := range basenames {
			store = append(append(store, n...), 0)
		}
	}
	out.Write(header(entries, store))
	return out.Bytes()
}

// TestLicenseChecks proves that the checks make dist-check runs fail on an artifact without
// the license, and pass on one with it.
func TestLicenseChecks(t *testing.T) {
	text := string(licenseText(t))
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	zipped := func(files map[string]string) []byte {
		var buf bytes.Buffer
		z := zip.NewWriter(&buf)
		for name, data := range files {
			w, _ := z.Create(name)
			w.Write([]byte(data))
		}
		z.Close()
		return buf.Bytes()
	}
	for _, c := range []struct {
		name    string
		file    string
		inside  string
		wantErr string
	}{
		{"npm tarball", write("with.tgz", tarGz(t, map[string]string{"package/package.json": "{}", "package/LICENSE": text})), "package/LICENSE", ""},
		{"npm tarball without LICENSE", write("without.tgz", tarGz(t, map[string]string{"package/package.json": "{}"})), "package/LICENSE", "does not carry the license: no package/LICENSE"},
		{"archive with another text", write("other.tar.gz", tarGz(t, map[string]string{"LICENSE": "All rights reserved."})), "LICENSE", "LICENSE is not the text of LICENSE"},
		{"bundle", write("with.mcpb", zipped(map[string]string{"manifest.json": "{}", "LICENSE": text})), "LICENSE", ""},
		{"bundle without LICENSE", write("without.mcpb", zipped(map[string]string{"manifest.json": "{}"})), "LICENSE", "no LICENSE in it"},
	} {
		files, err := archiveFiles(c.file)
		if err == nil {
			err = checkLicenseFile(c.file, files, c.inside, []byte(text))
		}
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.wantErr)
		}
	}

	for _, c := range []struct {
		name    string
		file    string
		wantErr string
	}{
		{"deb", write("with.deb", deb(t, map[string]string{"./usr/bin/mcp-simple-aggregator": "bin", "./usr/share/doc/mcp-simple-aggregator/copyright": text})), ""},
		{"deb without copyright", write("without.deb", deb(t, map[string]string{"./usr/bin/mcp-simple-aggregator": "bin"})), "no usr/share/doc/mcp-simple-aggregator/copyright in it"},
		{"rpm", write("with.rpm", rpmFile("MIT", []string{"mcp-simple-aggregator", "LICENSE"})), ""},
		{"rpm without License tag", write("nolicense.rpm", rpmFile("", []string{"mcp-simple-aggregator", "LICENSE"})), `declares the license "", want MIT`},
		{"rpm without the file", write("nofile.rpm", rpmFile("MIT", []string{"mcp-simple-aggregator"})), "no file named LICENSE"},
	} {
		err := checkLinuxPackageLicense(c.file, []byte(text))
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.wantErr)
		}
	}
}

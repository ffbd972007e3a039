package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	be "encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
)

// The checks below read what a release artifact declares and carries as its license; make
// dist-check runs them on every artifact (TestDist, TestDistGoReleaser), so that a package
// without its license fails the check.

// archiveFiles returns the regular files of an archive, by path (without a leading "./"):
// .tar.gz and .tgz (release archives, npm tarballs), .zip and .mcpb, and .deb (its data
// archive, gzip-compressed as nfpm writes it).
func archiveFiles(file string) (map[string][]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	switch {
	case strings.HasSuffix(file, ".tar.gz"), strings.HasSuffix(file, ".tgz"):
		return tarGzFiles(f)
	case strings.HasSuffix(file, ".zip"), strings.HasSuffix(file, ".mcpb"):
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		z, err := zip.NewReader(f, fi.Size())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		files := map[string][]byte{}
		for _, zf := range z.File {
			if zf.FileInfo().IsDir() {
				continue
			}
			r, err := zf.Open()
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", file, zf.Name, err)
			}
			data, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", file, zf.Name, err)
			}
			files[zf.Name] = data
		}
		return files, nil
	case strings.HasSuffix(file, ".deb"):
		data, err := arMember(f, "data.tar.gz")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		return tarGzFiles(bytes.NewReader(data))
	}
	return nil, fmt.Errorf("%s: not an archive this check reads", file)
}

func tarGzFiles(r io.Reader) (map[string][]byte, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[strings.TrimPrefix(path.Clean(h.Name), "./")] = data
	}
}

// arMember returns the member name of an ar archive (the container of a .deb).
func arMember(r io.Reader, name string) ([]byte, error) {
	br := bufio.NewReader(r)
	magic := make([]byte, 8)
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != "!<arch>\n" {
		return nil, fmt.Errorf("not an ar archive")
	}
	hdr := make([]byte, 60)
	for {
		if _, err := io.ReadFull(br, hdr); err != nil {
			return nil, fmt.Errorf("no member %s", name)
		}
		var size int64
		if _, err := fmt.Sscan(strings.TrimSpace(string(hdr[48:58])), &size); err != nil || size < 0 {
			return nil, fmt.Errorf("a damaged ar header")
		}
		data := make([]byte, size)
		if _, err := io.ReadFull(br, data); err != nil {
			return nil, err
		}
		if size%2 == 1 {
			br.ReadByte() // members are aligned to two bytes
		}
		if strings.TrimRight(strings.TrimSpace(string(hdr[:16])), "/") == name {
			return data, nil
		}
	}
}

// RPM header tags (rpmtag.h) and the string type.
const (
	rpmTagLicense   = 1014
	rpmTagBasenames = 1117
	rpmString       = 6
	rpmStringArray  = 8
)

// rpmInfo reads an rpm's License tag and the base names of its files.
func rpmInfo(file string) (lic string, basenames []string, err error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", nil, err
	}
	const leadSize = 96
	if len(data) < leadSize || !bytes.HasPrefix(data, []byte{0xed, 0xab, 0xee, 0xdb}) {
		return "", nil, fmt.Errorf("%s: not an rpm", file)
	}
	// The signature header, padded to 8 bytes, then the main header.
	sigEnd, _, err := rpmHeader(data, leadSize, nil)
	if err != nil {
		return "", nil, fmt.Errorf("%s: signature: %w", file, err)
	}
	if pad := (sigEnd - leadSize) % 8; pad != 0 {
		sigEnd += 8 - pad
	}
	_, tags, err := rpmHeader(data, sigEnd, map[uint32]bool{rpmTagLicense: true, rpmTagBasenames: true})
	if err != nil {
		return "", nil, fmt.Errorf("%s: header: %w", file, err)
	}
	if l := tags[rpmTagLicense]; len(l) > 0 {
		lic = l[0]
	}
	return lic, tags[rpmTagBasenames], nil
}

// rpmHeader reads the header structure at off: it returns where it ends and the string
// values of the tags asked for.
func rpmHeader(data []byte, off int, want map[uint32]bool) (int, map[uint32][]string, error) {
	if len(data) < off+16 || !bytes.Equal(data[off:off+3], []byte{0x8e, 0xad, 0xe8}) {
		return 0, nil, fmt.Errorf("no header magic at %d", off)
	}
	n := int(be.BigEndian.Uint32(data[off+8:]))
	size := int(be.BigEndian.Uint32(data[off+12:]))
	index, store := off+16, off+16+16*n
	end := store + size
	if n < 0 || size < 0 || end > len(data) {
		return 0, nil, fmt.Errorf("a header larger than the file")
	}
	tags := map[uint32][]string{}
	for i := range n {
		e := data[index+16*i:]
		tag, typ := be.BigEndian.Uint32(e), be.BigEndian.Uint32(e[4:])
		at, count := int(be.BigEndian.Uint32(e[8:])), int(be.BigEndian.Uint32(e[12:]))
		if !want[tag] || (typ != rpmString && typ != rpmStringArray) || at < 0 || at >= size {
			continue
		}
		s := data[store+at : end]
		for range count {
			before, after, _ := bytes.Cut(s, []byte{0})
			tags[tag] = append(tags[tag], string(before))
			s = after
		}
	}
	return end, tags, nil
}

// checkLicenseFile reports an archive that lacks the license's text at name.
func checkLicenseFile(file string, files map[string][]byte, name string, text []byte) error {
	got, ok := files[name]
	switch {
	case !ok:
		return fmt.Errorf("%s does not carry the license: no %s in it", file, name)
	case !bytes.Equal(got, text):
		return fmt.Errorf("%s: %s is not the text of LICENSE", file, name)
	}
	return nil
}

// checkLinuxPackageLicense reports a deb without the license's text in its copyright file,
// or an rpm that declares no license or lacks its text.
func checkLinuxPackageLicense(file string, text []byte) error {
	switch {
	case strings.HasSuffix(file, ".deb"):
		files, err := archiveFiles(file)
		if err != nil {
			return err
		}
		return checkLicenseFile(file, files, "usr/share/doc/"+command+"/copyright", text)
	case strings.HasSuffix(file, ".rpm"):
		lic, names, err := rpmInfo(file)
		switch {
		case err != nil:
			return err
		case lic != license:
			return fmt.Errorf("%s declares the license %q, want %s", file, lic, license)
		case !slices.Contains(names, licenseFile):
			return fmt.Errorf("%s does not carry the license: no file named %s in it", file, licenseFile)
		}
		return nil
	}
	return fmt.Errorf("%s: not a deb or an rpm", file)
}

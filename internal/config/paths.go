package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/hashicorp/go-envparse"
)

// resolvePath turns the value of a path field ("cwd", "envFile") into an absolute path:
// environment references expanded, a leading "~" replaced by the home directory, and a
// relative path taken from dir, the configuration file's directory (so that a file and the
// paths in it can move together). It returns what the expansion found missing, or a problem.
func resolvePath(root, key, field, value, dir string, x *expansion) (string, expanded, *Problem) {
	path, r := x.expand(value)
	if !r.ok() {
		return "", r, nil
	}
	problem := func(msg string, args ...any) *Problem {
		return &Problem{Pointer: pointer(root, key, field), Message: fmt.Sprintf("server %q: ", key) + fmt.Sprintf(msg, args...)}
	}
	if path == "" {
		return "", r, problem("%q is empty once environment references are expanded", field)
	}
	if rest, ok := strings.CutPrefix(path, "~"); ok && (rest == "" || os.IsPathSeparator(rest[0])) {
		name := "HOME"
		if runtime.GOOS == "windows" {
			name = "USERPROFILE"
		}
		home, _ := x.lookup(name)
		if home == "" {
			return "", r, problem("%q starts with \"~\", but %s is not set: set it, or write the path in full", field, name)
		}
		path = home + rest
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return path, r, nil
}

// checkDir reports a working directory that cannot be used: the child could not be started
// in it, and saying so now names the field instead of failing with a bare "chdir" later.
func checkDir(root, key, path string) *Problem {
	p := &Problem{Pointer: pointer(root, key, "cwd")}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.Message = fmt.Sprintf("server %q: the working directory %s does not exist: create it, or correct \"cwd\"", key, path)
	case err != nil:
		p.Message = fmt.Sprintf("server %q: cannot use the working directory %s: %v", key, path, pathErr(err))
	case !fi.IsDir():
		p.Message = fmt.Sprintf("server %q: the working directory %s is not a directory: correct \"cwd\"", key, path)
	default:
		return nil
	}
	return p
}

// readEnvFile reads the dotenv file at path. Its values are taken as written: no reference in
// them is expanded, since a secret may well contain a "$". No message quotes a value.
//
// The parser is github.com/hashicorp/go-envparse, which does no interpolation at all (by
// design, unlike github.com/joho/godotenv, which expands $VAR in unquoted and double-quoted
// values and quotes the rest of the file in some errors).
func readEnvFile(root, key, path string) (map[string]string, *Problem) {
	p := &Problem{Pointer: pointer(root, key, "envFile")}
	data, err := readLimited(path, maxEnvFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.Message = fmt.Sprintf("server %q: the env file %s does not exist: create it, or correct \"envFile\"", key, path)
		return nil, p
	case errors.Is(err, errTooLarge):
		p.Message = fmt.Sprintf("server %q: the env file %s is larger than 1 MiB: is it the right file?", key, path)
		return nil, p
	case err != nil:
		p.Message = fmt.Sprintf("server %q: cannot read the env file %s: %v", key, path, pathErr(err))
		return nil, p
	}
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	vars, err := envparse.Parse(bytes.NewReader(data))
	if err != nil {
		where := ""
		var pe *envparse.ParseError
		if errors.As(err, &pe) {
			err = pe.Err
			if pe.Line > 0 {
				where = fmt.Sprintf(" at line %d", pe.Line)
			}
		}
		p.Message = fmt.Sprintf("server %q: the env file %s cannot be parsed%s: %v; write one NAME=value per line, quoting a value that holds # or a quote", key, path, where, err)
		return nil, p
	}
	return vars, nil
}

// pathErr is the reason of a file system error without the path, which the message names
// already.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// maxEnvFile bounds what is read of an env file: a path such as /dev/zero must not make the
// loader read forever. A pipe still works, as it does in VS Code.
const maxEnvFile = 1 << 20 // 1 MiB, as the message says

var errTooLarge = errors.New("file too large")

func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errTooLarge
	}
	return data, nil
}

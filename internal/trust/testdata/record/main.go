// Command record writes testdata/servers/<key>.json: every list (tools, prompts, resources,
// resource templates, each page) and the instructions of each server of a configuration
// file ({"mcpServers": {...}}), spoken to in the legacy era with initialize. It is how the
// recorded definitions the scan is tested on were made (testdata/servers/README.md):
//
//	go run ./internal/trust/testdata/record -config servers.json -out internal/trust/testdata/servers
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func main() {
	config := flag.String("config", "", "configuration file of the servers to record")
	out := flag.String("out", "", "directory to write <key>.json into")
	only := flag.String("only", "", "record only these keys (comma-separated)")
	flag.Parse()
	data, err := os.ReadFile(*config)
	if err != nil {
		log.Fatal(err)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		log.Fatal(err)
	}
	for key, s := range cfg.MCPServers {
		if *only != "" && !slices.Contains(strings.Split(*only, ","), key) {
			continue
		}
		rec, err := record(s.Command, s.Args, s.Env)
		if err != nil {
			log.Printf("%s: %v", key, err)
			continue
		}
		b, _ := json.MarshalIndent(rec, "", " ")
		if err := os.WriteFile(filepath.Join(*out, key+".json"), append(b, '\n'), 0o644); err != nil {
			log.Fatal(err)
		}
		log.Printf("%s: %d tools, %d prompts, %d resources, %d templates, %d characters of instructions",
			key, len(rec.Tools), len(rec.Prompts), len(rec.Resources), len(rec.ResourceTemplates), len(rec.Instructions))
	}
}

type recording struct {
	Instructions      string            `json:"instructions,omitempty"`
	Tools             []json.RawMessage `json:"tools,omitempty"`
	Prompts           []json.RawMessage `json:"prompts,omitempty"`
	Resources         []json.RawMessage `json:"resources,omitempty"`
	ResourceTemplates []json.RawMessage `json:"resourceTemplates,omitempty"`
}

func record(command string, args []string, env map[string]string) (*recording, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, command, args...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() { in.Close(); cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(outPipe)
	sc.Buffer(nil, 64<<20)
	id := 0
	call := func(method string, params any) (json.RawMessage, error) {
		id++
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := in.Write(append(msg, '\n')); err != nil {
			return nil, err
		}
		for sc.Scan() {
			var m struct {
				ID     *int            `json:"id"`
				Method string          `json:"method"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil || m.Method != "" || *m.ID != id {
				continue // logs, notifications, requests of the server's
			}
			if m.Error != nil {
				return nil, fmt.Errorf("%s: %s", method, m.Error)
			}
			return m.Result, nil
		}
		return nil, fmt.Errorf("%s: no answer: %v", method, sc.Err())
	}
	res, err := call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "mcp-simple-aggregator-record", "version": "1"}})
	if err != nil {
		return nil, err
	}
	var init struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
		Instructions string                     `json:"instructions"`
	}
	json.Unmarshal(res, &init)
	note, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	in.Write(append(note, '\n'))
	rec := &recording{Instructions: init.Instructions}
	lists := []struct {
		capability, method, field string
		into                      *[]json.RawMessage
	}{
		{"tools", "tools/list", "tools", &rec.Tools},
		{"prompts", "prompts/list", "prompts", &rec.Prompts},
		{"resources", "resources/list", "resources", &rec.Resources},
		{"resources", "resources/templates/list", "resourceTemplates", &rec.ResourceTemplates},
	}
	for _, l := range lists {
		if init.Capabilities[l.capability] == nil {
			continue
		}
		cursor := ""
		for page := 0; page < 100; page++ {
			params := map[string]any{}
			if cursor != "" {
				params["cursor"] = cursor
			}
			res, err := call(l.method, params)
			if err != nil {
				// A list the server offers but does not answer (templates without the
				// method, resources of a database it cannot reach): the others are kept.
				log.Printf("%s: %v", command, err)
				break
			}
			var p map[string]json.RawMessage
			json.Unmarshal(res, &p)
			var items []json.RawMessage
			json.Unmarshal(p[l.field], &items)
			*l.into = append(*l.into, items...)
			cursor = ""
			json.Unmarshal(p["nextCursor"], &cursor)
			if cursor == "" {
				break
			}
		}
	}
	return rec, nil
}

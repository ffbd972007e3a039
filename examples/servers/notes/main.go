// Command notes is a demo MCP server that keeps short notes in memory, built with the Go MCP
// SDK: two tools, a prompt and a resource. It needs no network and is one of the servers of examples/demo.json; its greeting comes
// from the environment, to show the "env" of a server entry.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	var (
		mu    sync.Mutex
		notes []string
	)
	greeting := os.Getenv("NOTES_GREETING")
	if greeting == "" {
		greeting = "Hello"
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "add_note", Description: "Remembers a note."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Text string `json:"text" jsonschema:"the note"`
		}) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			notes = append(notes, in.Text)
			n := len(notes)
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("note %d saved", n)}}}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "list_notes", Description: "Lists the notes, oldest first."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			all := slices.Clone(notes)
			mu.Unlock()
			text := greeting + "! No notes yet."
			if len(all) > 0 {
				text = greeting + "! Your notes:\n- " + strings.Join(all, "\n- ")
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	render := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(notes, "\n")
	}
	server.AddPrompt(&mcp.Prompt{Name: "summarize_notes", Description: "Asks for a summary of the notes."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{
				Role:    "user",
				Content: &mcp.TextContent{Text: "Summarize these notes:\n" + render()},
			}}}, nil
		})
	server.AddResource(&mcp.Resource{URI: "notes://all", Name: "all notes", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: render()}}}, nil
		})
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

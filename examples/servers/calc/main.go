// Command calc is a demo MCP server with arithmetic tools, built with the Go MCP SDK. It needs
// no network and is one of the servers of examples/demo.json.
package main

import (
	"context"
	"fmt"
	"log"
	"math"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type pair struct {
	A float64 `json:"a" jsonschema:"the first number"`
	B float64 `json:"b" jsonschema:"the second number"`
}

type number struct {
	Result float64 `json:"result"`
}

func main() {
	server := mcp.NewServer(&mcp.Implementation{Name: "calc", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "add", Description: "Adds two numbers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in pair) (*mcp.CallToolResult, number, error) {
			return nil, number{in.A + in.B}, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "divide", Description: "Divides a by b."},
		func(_ context.Context, _ *mcp.CallToolRequest, in pair) (*mcp.CallToolResult, number, error) {
			if in.B == 0 {
				return nil, number{}, fmt.Errorf("cannot divide %v by zero", in.A)
			}
			return nil, number{in.A / in.B}, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "sqrt", Description: "The square root of a."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			A float64 `json:"a" jsonschema:"a number, at least 0"`
		}) (*mcp.CallToolResult, number, error) {
			if in.A < 0 {
				return nil, number{}, fmt.Errorf("%v has no real square root", in.A)
			}
			return nil, number{math.Sqrt(in.A)}, nil
		})
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

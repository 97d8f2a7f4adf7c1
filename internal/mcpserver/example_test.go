package mcpserver_test

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dairuntime/dair/internal/mcpserver"
)

// Example connects an MCP client to the server in memory and lists the tools. Tool calls
// would go to the node at Config.Server with Config.Token.
func Example() {
	ctx := context.Background()
	srv := mcpserver.New(mcpserver.Config{Server: "http://127.0.0.1:8080", Token: "TOKEN"})
	serverT, clientT := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, serverT, nil)
	if err != nil {
		fmt.Println("connect server:", err)
		return
	}
	defer func() {
		if err := ss.Close(); err != nil {
			fmt.Println("close server session:", err)
		}
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "v0"}, nil).Connect(ctx, clientT, nil)
	if err != nil {
		fmt.Println("connect client:", err)
		return
	}
	defer func() {
		if err := cs.Close(); err != nil {
			fmt.Println("close client session:", err)
		}
	}()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		fmt.Println("list tools:", err)
		return
	}
	fmt.Println(len(res.Tools), "tools, first:", res.Tools[0].Name)
	// Output: 21 tools, first: cancel_run
}

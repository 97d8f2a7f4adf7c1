package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/api"
	"github.com/dairuntime/dair/internal/store/boltstore"
)

func ExampleNew() {
	dir, err := os.MkdirTemp("", "dair-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Println(err)
		}
	}()
	st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(dir, "dair.db"), NoSync: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := st.Close(); err != nil {
			fmt.Println(err)
		}
	}()
	node, err := actors.Start(context.Background(), actors.Config{NodeID: "example", Store: st})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := node.Stop(context.Background()); err != nil {
			fmt.Println(err)
		}
	}()
	srv := httptest.NewServer(api.New(api.Config{Node: node}))
	defer srv.Close()

	resp, err := srv.Client().Post(srv.URL+"/v1/runs", "application/json", strings.NewReader(`{"pipeline":"missing"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := resp.Body.Close(); err != nil {
			fmt.Println(err)
		}
	}()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.StatusCode, strings.TrimSpace(string(b)))
	// Output: 404 {"error":{"code":"unknown_pipeline","message":"api: pipeline \"missing\" not found"}}
}

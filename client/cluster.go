package client

import (
	"context"
	"net/http"

	"github.com/dairuntime/dair/httpapi"
)

// Members lists the cluster members the node sees (GET /v1/cluster/members). A node that is
// not a cluster member (dair dev) answers *Error with Status 404.
func (c *Client) Members(ctx context.Context) (*httpapi.MemberList, error) {
	var out httpapi.MemberList
	if err := c.do(ctx, http.MethodGet, "/v1/cluster/members", nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

package messages

// Tenant metadata keys (seed 001): dair sets them on every outbound call it makes on a run's
// behalf (gRPC metadata, HTTP headers). They are diagnostics and routing hints for the callee;
// the tenant boundary stays the ExecutionContextSnapshot.
const (
	MetadataTenantID = "x-tenant-id"
	MetadataOrgID    = "x-org-id"
	MetadataUserID   = "x-user-id"
)

// TenantMetadata returns the tenant metadata of s as key/value pairs, in the order tenant, org,
// user, leaving out empty values. The caller owns the returned slice.
func TenantMetadata(s *ExecutionContextSnapshot) [][2]string {
	var out [][2]string
	for _, kv := range [][2]string{{MetadataTenantID, s.GetTenantId()}, {MetadataOrgID, s.GetOrgId()}, {MetadataUserID, s.GetUserId()}} {
		if kv[1] != "" {
			out = append(out, kv)
		}
	}
	return out
}

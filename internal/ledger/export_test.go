package ledger

// SetHoldHook has f called whenever a committer loop begins to hold a batch of starts, until
// the returned function restores the hook. Call it before the committer starts.
func SetHoldHook(f func()) (restore func()) {
	old := testHookHold
	testHookHold = f
	return func() { testHookHold = old }
}

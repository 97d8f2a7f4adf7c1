// Package storetest is the contract test suite every store.Store backend must pass.
//
// It is a regular (non-test) package so backend tests import it. Each contract test gets a
// fresh store from the backend's Factory and drives time through a FakeClock, so expiry rules
// (registry TTL, queue visibility, reservation TTL, leases) are checked without sleeping.
//
// # Usage
//
//	func TestStore_Contract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
//			st, err := mybackend.Open(mybackend.Options{Now: now})
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() {
//				if err := st.Close(); err != nil {
//					t.Error(err)
//				}
//			})
//			return st
//		})
//	}
//
//	func BenchmarkCommitSteps(b *testing.B) {
//		storetest.BenchCommit(b, openStoreForBench(b))
//	}
package storetest

package actors

import "sync"

// keyedLocks is one mutex per key, held only while someone holds or waits for it.
type keyedLocks struct {
	mu sync.Mutex
	m  map[string]*keyedLock // guarded by mu
}

type keyedLock struct {
	sync.Mutex
	users int // holders and waiters, guarded by keyedLocks.mu
}

// lock takes key's mutex and returns its release.
func (k *keyedLocks) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = make(map[string]*keyedLock)
	}
	l := k.m[key]
	if l == nil {
		l = &keyedLock{}
		k.m[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

// Package localcluster launches and breaks a local dair cluster without a test: a redis-server
// on a free loopback port and N `dair node` processes on it, with the faults an operator's
// chaos run needs (kill -9 and restart, SIGSTOP and SIGCONT, a membership partition through
// the nodes' fault-injection endpoints, Redis killed and restarted on its AOF).
//
// It is the testing-free core of what testkit's ProcessCluster and Redis do for tests, so that
// the dair binary (`dair chaos`) can use it without linking package testing. Every call that
// starts or waits blocks until the process is ready or ctx ends; methods of Redis, Node and
// Cluster are safe for concurrent use.
//
// # Usage
//
//	r, err := localcluster.StartRedis(ctx, localcluster.RedisOptions{Dir: dir})
//	c, err := localcluster.Start(ctx, localcluster.Options{Binary: bin, N: 3, StoreURL: r.URL(), LogDir: dir})
//	defer c.Close()
//	n := c.Node(1)
//	err = n.Kill()         // kill -9; n.Restart(ctx) brings it back on the same addresses
//	err = n.Stop()         // SIGSTOP; n.Cont() resumes it
//	err = n.Partition(ctx) // cut its membership off; n.Heal(ctx) restores it
//	err = r.Kill()         // and r.Restart(ctx) reloads the AOF
package localcluster

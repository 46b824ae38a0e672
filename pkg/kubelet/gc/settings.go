package gc

import "sync/atomic"

// Settings hold the policy in force: a SIGHUP replaces it while the agent
// runs. The Kubelet's garbage collection and the eviction manager's
// reclaim read it.
type Settings struct{ p atomic.Pointer[Policy] }

// NewSettings returns settings holding p.
func NewSettings(p Policy) *Settings {
	s := &Settings{}
	s.Set(p)
	return s
}

// Policy is the policy in force.
func (s *Settings) Policy() Policy { return *s.p.Load() }

// Set puts p in force from now on.
func (s *Settings) Set(p Policy) { s.p.Store(&p) }

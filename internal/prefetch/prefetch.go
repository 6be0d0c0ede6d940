// Package prefetch asks the processor for cache lines ahead of their use.
//
// A walk over memory the caches do not hold (a tree's in-memory nodes, a
// hash table larger than the caches) waits for each miss when it reaches
// it. A prefetch instruction starts the fetch and retires at once, so the
// walk issues the fetches of the next few nodes or slots and goes on while
// they arrive. An ordinary load used for the same purpose makes the
// processor wait when the load reaches the head of its reorder window.
package prefetch

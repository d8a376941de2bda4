// Package resultbound holds the bound on a result kept with a completed
// record (state.MaxResultBytes), so the root's memory store, which state
// imports, enforces the same one.
package resultbound

// Max is state.MaxResultBytes.
const Max = 16 << 10

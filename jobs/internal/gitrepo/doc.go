// Package gitrepo is the worker's one way to reach a Git repository: the
// rule that turns a ref into a commit (ref.go), the lookup that names that
// commit without fetching (Resolve), the clone (Clone), the sorting of
// go-git's errors into failure reasons (Classify) and the credentials read
// from a mounted Secret (LoadAuth). An Artifact's Git source and a
// ClaimTemplate's repository both go through it, so a ref or an error means
// the same for both.
package gitrepo

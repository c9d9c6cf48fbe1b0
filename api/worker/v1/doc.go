// Package workerv1 is the contract between the controller and the worker,
// version 1, in one place:
//
//   - spec.go: the document the controller hands the worker (PACKLINE_SPEC)
//     and the env names and paths the pod carries;
//   - result.go: the result the worker writes to its termination message;
//   - reasons.go: every reason a worker failure carries, with its class
//     (retryable or permanent) and a hint.
//
// It holds types and rules only, so the manager links no worker code: how
// an error becomes a reason (oras, HTTP, Git) lives in jobs/failure, on the
// worker side. A test keeps cmd/manager's imports free of it.
package workerv1

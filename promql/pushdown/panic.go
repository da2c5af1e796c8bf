package pushdown

import "fmt"

// workerPanic is the error of an evaluation whose worker goroutine panicked:
// the query fails with it instead of the process.
type workerPanic struct {
	val   any    // what was passed to panic
	stack []byte // the worker's stack where it panicked
}

func (p *workerPanic) Error() string {
	return fmt.Sprintf("pushdown: evaluation panicked: %v", p.val)
}

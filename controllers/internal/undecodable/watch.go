package undecodable

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/watch"
)

// convertingWatch hands on the events of src after convert.
type convertingWatch struct {
	src  watch.Interface
	out  chan watch.Event
	done chan struct{}
	once sync.Once
}

func newConvertingWatch(ctx context.Context, src watch.Interface, convert func(watch.Event) watch.Event) *convertingWatch {
	w := &convertingWatch{src: src, out: make(chan watch.Event), done: make(chan struct{})}
	go func() {
		defer close(w.out)
		for ev := range src.ResultChan() {
			select {
			case w.out <- convert(ev):
			case <-w.done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return w
}

func (w *convertingWatch) Stop() {
	w.once.Do(func() {
		close(w.done)
		w.src.Stop()
	})
}

func (w *convertingWatch) ResultChan() <-chan watch.Event { return w.out }

package fsq

import (
	"os"
	"sync"
)

// SparePrefix starts the names of spare files; readers skip dot-files.
const SparePrefix = ".spare-"

// Spares keeps a few empty files ready in a directory, created by a
// background goroutine, so that a caller on a critical path can take one
// and rename it into place instead of creating a file: on some disks
// creating a file costs from 20 µs to over a millisecond of kernel time
// (inode allocation), while a rename costs about 20 µs. Take never blocks:
// when the pool is empty it creates the file itself. Root.NewSpares
// starts one.
type Spares struct {
	create func() (*os.File, error) // a new, empty file named SparePrefix+...
	drop   func(f *os.File)         // removes a spare left unused
	ch     chan *os.File
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// NewSpares starts a pool of n spare files in the session directory dir,
// created with exactly perm, whatever the umask (O_EXCL, never through a
// symlink; the mode is set off the taker's path). Spares left when the
// pool closes are removed (RemoveOrLater).
func (s *Root) NewSpares(dir string, n int, perm os.FileMode) *Spares {
	return newSpares(n,
		func() (*os.File, error) {
			f, err := s.CreateTemp(dir, SparePrefix, perm)
			if err == nil {
				if err = chmodIfUmasked(f, perm); err != nil {
					f.Close()
					s.RemoveOrLater(s.RelOf(f.Name()))
					return nil, err
				}
			}
			return f, err
		},
		func(f *os.File) { s.RemoveOrLater(s.RelOf(f.Name())) })
}

// newSpares starts a pool of n spare files made by create and removed by
// drop when the pool closes with them unused.
func newSpares(n int, create func() (*os.File, error), drop func(f *os.File)) *Spares {
	s := &Spares{create: create, drop: drop, ch: make(chan *os.File, n), stop: make(chan struct{}), done: make(chan struct{})}
	go s.fill()
	return s
}

func (s *Spares) fill() {
	defer close(s.done)
	for {
		f, err := s.create()
		if err != nil {
			return // The directory is gone or full; Take creates on demand.
		}
		select {
		case s.ch <- f:
		case <-s.stop:
			f.Close()
			s.drop(f)
			return
		}
	}
}

// Take returns an empty file open for writing, under a spare name in the
// pool's directory. The caller renames it (and owns it).
func (s *Spares) Take() (*os.File, error) {
	select {
	case f := <-s.ch:
		return f, nil
	default:
		return s.create()
	}
}

// Close stops the pool and removes the spares it still holds.
func (s *Spares) Close() {
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		for {
			select {
			case f := <-s.ch:
				f.Close()
				s.drop(f)
			default:
				return
			}
		}
	})
}

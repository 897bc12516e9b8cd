package fsq

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"math/rand/v2"
)

// SparePrefix starts the names of spare files; readers skip dot-files.
const SparePrefix = ".spare-"

// Spares keeps a few empty files ready in a directory, created by a
// background goroutine, so that a caller on a critical path can take one
// and rename it into place instead of creating a file: on some disks
// creating a file costs from 20 µs to over a millisecond of kernel time
// (inode allocation), while a rename costs about 20 µs. Take never blocks:
// when the pool is empty it creates the file itself.
type Spares struct {
	dir  string
	perm os.FileMode
	// made and drop replace create and os.Remove for NewSparesWith.
	made func() (*os.File, error)
	drop func(f *os.File)
	ch   chan *os.File
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// NewSpares starts a pool of n spare files in dir.
func NewSpares(dir string, n int, perm os.FileMode) *Spares {
	s := &Spares{dir: dir, perm: perm, ch: make(chan *os.File, n), stop: make(chan struct{}), done: make(chan struct{})}
	go s.fill()
	return s
}

// NewSparesWith starts a pool of n spare files made by create (a new,
// empty file under a name starting with SparePrefix) and removed by drop
// when the pool closes with them unused: for a caller that reaches its
// directory through a handle rather than by path.
func NewSparesWith(n int, create func() (*os.File, error), drop func(f *os.File)) *Spares {
	s := &Spares{made: create, drop: drop, ch: make(chan *os.File, n), stop: make(chan struct{}), done: make(chan struct{})}
	go s.fill()
	return s
}

func (s *Spares) remove(f *os.File) {
	if s.drop != nil {
		s.drop(f)
		return
	}
	os.Remove(f.Name())
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
			s.remove(f)
			return
		}
	}
}

func (s *Spares) create() (*os.File, error) {
	if s.made != nil {
		return s.made()
	}
	for i := 0; ; i++ {
		name := filepath.Join(s.dir, SparePrefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := CreateFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, s.perm)
		if err == nil || !errors.Is(err, os.ErrExist) || i > 100 {
			return f, err
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
				s.remove(f)
			default:
				return
			}
		}
	})
}

// RemoveSpares deletes spare files a crashed process left in dir.
func RemoveSpares(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), SparePrefix) {
			_ = os.Remove(filepath.Join(dir, e.Name())) // Best effort: readers skip dot-files.
		}
	}
}
